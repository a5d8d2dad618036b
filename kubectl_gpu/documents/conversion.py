"""From YAML nodes to plain data as NVIDIA's Go tools read it, with what a plain load hides.

Owns building plain data from a composed node tree (merge keys, key names and explicit tags
as Go's yaml.v2 resolves them, timestamps kept as text) and the limits of that walk (alias
bombs, pathological nesting); what a tag means is `tags.py`'s, the findings about values and
keys `values.py`'s. The findings carry paths only: `locating.place_all` places them. Must not
parse text (`parsing.py`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from kubectl_gpu import findings, scalars
from kubectl_gpu.documents import tags, values
from kubectl_gpu.documents.locating import Document
from kubectl_gpu.findings import Finding, Path

if TYPE_CHECKING:
    import yaml

MAX_NODES = 200_000  # after alias expansion; a ConfigMap holds at most 1 MiB of text
MAX_DEPTH = 64


class _TooComplex(Exception):
    pass


def document_from_node(
    root: yaml.Node | None, file: str, line_base: int, text: str
) -> tuple[Document, list[Finding]]:
    """The document `root` holds, and the YAML-level findings about it (paths only)."""
    found: list[Finding] = []
    if root is None:
        return Document(file, None), found
    try:
        data = _Converter(found, line_base, text).convert(root, ())
    except _TooComplex as e:
        found = [
            findings.error(
                (), "yaml.too-complex", str(e), "remove the YAML aliases (*name) or split the file"
            )
        ]
        data = None
    return Document(file, data, root), found


class _Converter:
    """Builds plain data from composed nodes, reporting what a plain load would hide."""

    def __init__(self, found: list[Finding], line_base: int, text: str) -> None:
        import yaml

        self._line_base = line_base
        self._text = text
        self._yaml = yaml
        self._constructor = yaml.constructor.SafeConstructor()
        self._found = found
        self._budget = MAX_NODES
        self._merged_sizes: dict[int, int] = {}
        self._merged: dict[int, set[int]] = {}  # id(mapping node) -> ids of pairs from <<

    def convert(self, node: yaml.Node, path: Path) -> Any:
        self._budget -= 1
        if self._budget < 0:
            raise _TooComplex(f"the document expands to more than {MAX_NODES} values")
        if len(path) > MAX_DEPTH:
            raise _TooComplex(f"the document nests deeper than {MAX_DEPTH} levels")
        if isinstance(node, self._yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, self._yaml.SequenceNode):
            return [self.convert(item, (*path, i)) for i, item in enumerate(node.value)]
        return self._scalar(node, path)

    def _merged_size(self, node: yaml.Node) -> int:
        """How many key/value pairs `node` holds once its merge keys (<<) are expanded.

        Counted before PyYAML expands them: `<<: [*a, *a]` doubles a mapping in 20 bytes, so
        30 levels of it would build a billion pairs before a single value is converted.
        """
        known = self._merged_sizes.get(id(node))
        if known is not None:
            return known
        size = 0
        for key, value in node.value:
            if key.tag != "tag:yaml.org,2002:merge":
                size += 1
                continue
            merged = value.value if isinstance(value, self._yaml.SequenceNode) else [value]
            size += sum(
                self._merged_size(m) for m in merged if isinstance(m, self._yaml.MappingNode)
            )
            size = min(size, MAX_NODES + 1)
        self._merged_sizes[id(node)] = size
        return size

    def _mapping(self, node: yaml.MappingNode, path: Path) -> dict[str, Any]:
        if self._merged_size(node) > self._budget:
            raise _TooComplex(f"the document expands to more than {MAX_NODES} values")
        merged = self._flatten(node)
        result: dict[str, Any] = {}
        first_line: dict[str, int] = {}
        for pair in node.value:
            key_node, value_node = pair
            if not isinstance(key_node, self._yaml.ScalarNode):
                self._found.append(
                    findings.error(
                        path,
                        "yaml.complex-key",
                        "a mapping key must be a plain string",
                        "write the key as a string",
                    )
                )
                continue
            key = self._key(key_node, path)
            if key is None:
                continue
            if key in first_line and id(pair) not in merged:
                self._found.append(values.duplicate_key(key, (*path, key), first_line[key]))
            if id(pair) not in merged:  # a key merged in by << may be overridden: its purpose
                first_line.setdefault(key, key_node.start_mark.line + 1 + self._line_base)
            result[key] = self.convert(value_node, (*path, key))
        return result

    def _flatten(self, node: yaml.MappingNode) -> set[int]:
        """Resolve YAML merge keys (<<) as Go's yaml.v2 does; return the ids of merged pairs.

        yaml.v2 applies the pairs in the order written, a merge setting every key it brings
        (so it overrides a key written before it, and a key written after it overrides the
        merge); of a list of mappings (`<<: [*a, *b]`) the earlier one wins. The pairs are
        laid out in that order, so that building the dict (the last pair wins) gives Go's
        result. A node reached again through an alias is already flattened.
        """
        if id(node) in self._merged:
            return self._merged[id(node)]
        pairs: list[tuple[Any, Any]] = []
        merged: set[int] = set()
        for key, value in node.value:
            if key.tag != "tag:yaml.org,2002:merge":
                pairs.append((key, value))
                continue
            sources = value.value if isinstance(value, self._yaml.SequenceNode) else [value]
            for source in reversed(sources):
                if not isinstance(source, self._yaml.MappingNode):
                    raise self._yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        "map merge requires map or sequence of maps as the value",
                        source.start_mark,
                    )
                self._flatten(source)
                pairs.extend(source.value)
                merged.update(id(pair) for pair in source.value)
        node.value = pairs
        self._merged[id(node)] = merged
        return merged

    def _scalar(self, node: yaml.Node, path: Path) -> Any:
        written = self._written_tag(node)
        if written is not None and (read := self._explicit(node, written, path)) is not tags.CHECK:
            return read
        tag = node.tag.rsplit(":", 1)[-1]
        if tag in ("timestamp", "merge", "value"):
            # a date kept as text (the schemas never want dates); `<<` or `=` as a value is
            # the text to Go, where PyYAML has no constructor for it
            return node.value
        if tag == "bool" and node.value.lower() in values.YAML11_BOOLEANS:
            self._found.append(values.ambiguous_boolean(node.value, path))
        elif tag in ("int", "float"):
            problem = values.number_problem(node.value, tag, path)
            if problem is not None:
                self._found.append(problem)
                if problem.severity is findings.Severity.ERROR:
                    return node.value  # kept as text: no field takes it as a number
        if (
            not getattr(node, "style", None)
            and node.tag.startswith("tag:yaml.org,2002:")
            and not self._tagged(node)
        ):
            as_go = scalars.go_plain(node.value, tag)  # where PyYAML and upstream's yaml differ
            if isinstance(as_go, bool):
                self._found.append(values.ambiguous_boolean(node.value, path))
            if as_go is not scalars.UNCHANGED:
                return as_go
        return self._constructed(node, path)

    def _constructed(self, node: yaml.Node, path: Path) -> Any:
        try:
            return self._constructor.construct_object(node)
        except (ValueError, LookupError, TypeError, ArithmeticError, self._yaml.YAMLError):
            # LookupError: PyYAML indexes the text (`!!int ''` raises IndexError)
            self._found.append(tags.bad_scalar(node, path))
            return node.value

    def _explicit(self, node: yaml.Node, written: str, path: Path) -> Any:
        """A scalar with the explicit tag `written`, as Go reads it (or `tags.CHECK`)."""
        read = tags.explicitly_tagged(node, written, path)
        if node.tag == tags.YAML_ORG + "timestamp" and self._plain_type(node.value) != "timestamp":
            text = values.shown(node.value)
            read = tags.tag_refused(node, path, f"cannot decode !!str `{text}` as a !!timestamp")
        elif node.tag == tags.YAML_ORG + "int" and isinstance(
            scalars.go_plain(node.value, "str"), float
        ):
            # beyond int64 and uint64, Go resolves the digits as a float, then refuses the tag
            text = values.shown(node.value)
            read = tags.tag_refused(node, path, f"cannot decode !!float `{text}` as a !!int")
        if isinstance(read, Finding):
            self._found.append(read)
            return node.value
        if read is not tags.CHECK and not getattr(node, "style", None):
            if self._plain_type(node.value) != "str":
                self._found.append(tags.made_string(written, node.value, path))
        return read

    def _key(self, node: yaml.ScalarNode, path: Path) -> str | None:
        """The key as upstream names it: Go converts a plain `on`, `1.0` or `~` key to JSON as
        "true", "1" or nothing at all (the file is refused)."""
        written = self._written_tag(node)
        if written is not None:
            read = tags.explicitly_tagged(node, written, (*path, node.value))
            if isinstance(read, Finding):
                self._found.append(dataclasses.replace(read, at_key=True))
                return None
            if read is tags.CHECK and node.tag == tags.YAML_ORG + "null":  # `!!null : a`
                null = values.null_key(node.value, (*path, node.value))
                self._found.append(dataclasses.replace(null, at_key=True))
                return None
            if isinstance(read, str):
                return read
        if getattr(node, "style", None) or written is not None:
            return str(node.value)
        tag = node.tag.rsplit(":", 1)[-1]
        key = scalars.go_key(node.value, tag)
        if key is None:
            self._found.append(
                dataclasses.replace(values.null_key(node.value, (*path, node.value)), at_key=True)
            )
        elif key != node.value:
            self._found.append(values.key_renamed(node.value, key, (*path, key)))
        return key

    def _plain_type(self, text: str) -> str:
        """The short tag YAML gives `text` written plain, without a tag (`4` is an int)."""
        if not hasattr(self, "_resolver"):
            self._resolver = self._yaml.resolver.Resolver()
        tag: str = self._resolver.resolve(  # type: ignore[no-untyped-call]
            self._yaml.ScalarNode, text, (True, False)
        )
        return tag.rsplit(":", 1)[-1]

    def _tagged(self, node: yaml.Node) -> bool:
        """True when the scalar carries an explicit tag (`!!str 4`): Go honours it too."""
        return self._written_tag(node) is not None

    def _written_tag(self, node: yaml.Node) -> str | None:
        """The scalar's explicit tag as written (`!`, `!!int`, `!foo`, `!<...>`), or None.

        PyYAML resolves the non-specific `!` as if the scalar were plain (`! 4` is an int);
        Go reads it as a string, so the written form is what tells them apart.
        """
        text = self._text[node.start_mark.index : node.end_mark.index]
        if text.startswith("&"):  # an anchor comes before the tag
            text = text.split(None, 1)[1] if len(text.split(None, 1)) > 1 else ""
        if not text.startswith("!"):
            return None
        return text.split(None, 1)[0] if text[1:2] != "<" else text[: text.find(">") + 1]
