"""From YAML nodes to plain data as NVIDIA's Go tools read it, with what a plain load hides.

Owns building plain data from a composed node tree (merge keys, key names and explicit tags
as Go's yaml.v2 resolves them, timestamps kept as text) and the YAML-level findings no schema
can see: duplicate keys, YAML 1.1 booleans, numbers the parsers read differently, null keys,
alias bombs and pathological nesting. The findings carry paths only: `locating.place_all`
places them. Must not parse text (`parsing.py`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from kubectl_gpu import findings, scalars
from kubectl_gpu.documents.locating import Document
from kubectl_gpu.findings import Finding, Path

if TYPE_CHECKING:
    import yaml

MAX_NODES = 200_000  # after alias expansion; a ConfigMap holds at most 1 MiB of text
MAX_DEPTH = 64
# Longer than any number Go's reader spells in full (a 64-bit value in binary is 0b and 64
# digits, with a sign; float64's longest exact decimal forms have about 40 significant
# digits); Python refuses to read ints over 4,300 digits and reading a long one costs time
# quadratic in its length.
MAX_NUMBER_CHARS = 80
_YAML11_BOOLEANS = {"yes", "no", "on", "off"}  # y and n: see scalars.py
# yaml.v2's resolve.go: the tags it checks a scalar against (`!!int x` fails); a scalar with
# any other tag (`!foo`, the non-specific `!`, `!!set`, a verbatim `!<...>`) is the string
# as written. The tags of mappings and sequences are not looked at.
_YAML_ORG = "tag:yaml.org,2002:"
_CHECKED_TAGS = frozenset({"str", "bool", "int", "float", "timestamp", "null", "binary"})
_GO_NULLS = frozenset({"", "~", "null", "Null", "NULL"})

# Findings about a scalar the loader keeps as text: the schema's "expected an integer, found
# the string …" at the same place says nothing more (validation drops it).
VALUE_CODES = frozenset({"yaml.bad-scalar", "yaml.number-too-large", "yaml.sexagesimal-number"})
NON_DECIMAL = "yaml.non-decimal-number"
TAGGED_STRING = "yaml.tag-makes-string"  # an error where a field wants the value untagged


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
                self._found.append(_duplicate_key(key, (*path, key), first_line[key]))
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
        if written is not None and (read := self._explicit(node, written, path)) is not _CHECK:
            return read
        tag = node.tag.rsplit(":", 1)[-1]
        if tag == "timestamp":
            return node.value  # keep JSON-compatible: the schemas never want dates
        if tag in ("merge", "value"):
            return node.value  # `<<` or `=` as a value: the text to Go, not a constructor
        if tag == "bool" and node.value.lower() in _YAML11_BOOLEANS:
            self._found.append(_ambiguous_boolean(node.value, path))
        elif tag in ("int", "float"):
            problem = _number_problem(node.value, tag, path)
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
                self._found.append(_ambiguous_boolean(node.value, path))
            if as_go is not scalars.UNCHANGED:
                return as_go
        return self._constructed(node, path)

    def _constructed(self, node: yaml.Node, path: Path) -> Any:
        try:
            return self._constructor.construct_object(node)
        except (ValueError, LookupError, TypeError, ArithmeticError, self._yaml.YAMLError):
            # LookupError: PyYAML indexes the text (`!!int ''` raises IndexError)
            self._found.append(_bad_scalar(node, path))
            return node.value

    def _explicit(self, node: yaml.Node, written: str, path: Path) -> Any:
        """A scalar with the explicit tag `written`, as Go reads it (or `_CHECK`)."""
        read = _explicitly_tagged(node, written, path)
        if node.tag == _YAML_ORG + "timestamp" and self._plain_type(node.value) != "timestamp":
            text = _shown(node.value)
            read = _tag_refused(node, path, f"cannot decode !!str `{text}` as a !!timestamp")
        elif node.tag == _YAML_ORG + "int" and isinstance(
            scalars.go_plain(node.value, "str"), float
        ):
            # beyond int64 and uint64, Go resolves the digits as a float, then refuses the tag
            text = _shown(node.value)
            read = _tag_refused(node, path, f"cannot decode !!float `{text}` as a !!int")
        if isinstance(read, Finding):
            self._found.append(read)
            return node.value
        if read is not _CHECK and not getattr(node, "style", None):
            if self._plain_type(node.value) != "str":
                self._found.append(_made_string(written, node.value, path))
        return read

    def _key(self, node: yaml.ScalarNode, path: Path) -> str | None:
        """The key as upstream names it: Go converts a plain `on`, `1.0` or `~` key to JSON as
        "true", "1" or nothing at all (the file is refused)."""
        written = self._written_tag(node)
        if written is not None:
            read = _explicitly_tagged(node, written, (*path, node.value))
            if isinstance(read, Finding):
                self._found.append(dataclasses.replace(read, at_key=True))
                return None
            if read is _CHECK and node.tag == _YAML_ORG + "null":  # `!!null : a`, as `~: a`
                self._found.append(
                    dataclasses.replace(_null_key(node.value, (*path, node.value)), at_key=True)
                )
                return None
            if isinstance(read, str):
                return read
        if getattr(node, "style", None) or written is not None:
            return str(node.value)
        tag = node.tag.rsplit(":", 1)[-1]
        key = scalars.go_key(node.value, tag)
        if key is None:
            self._found.append(
                dataclasses.replace(_null_key(node.value, (*path, node.value)), at_key=True)
            )
        elif key != node.value:
            self._found.append(_key_renamed(node.value, key, (*path, key)))
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


class _Check:
    """Marker: a tag Go checks the scalar against, as PyYAML does: read it as before."""


_CHECK = _Check()


def _explicitly_tagged(node: yaml.Node, written: str, path: Path) -> Any:
    """A scalar with an explicit tag, as Go's yaml.v2 reads it: the value, a finding (Go
    refuses the file), or `_CHECK` where PyYAML's reading already agrees.

    A tag Go does not check (`!`, `!foo`, `!!set`, `!<tag:example.com:x>`) gives the string
    as written; `!!null` takes only the null spellings; `!!binary` is decoded (base64, then
    the bytes as UTF-8, each invalid byte read as U+FFFD, as Go's JSON encoding does).
    """
    short = node.tag[len(_YAML_ORG) :] if node.tag.startswith(_YAML_ORG) else None
    if written == "!" or short not in _CHECKED_TAGS:
        return str(node.value)
    if short == "null" and node.value not in _GO_NULLS:
        return _tag_refused(node, path, f"cannot decode !!str `{_shown(node.value)}` as a !!null")
    if short == "binary":
        import base64
        import binascii

        try:
            raw = base64.b64decode(node.value.replace("\n", "").replace("\r", ""), validate=True)
        except (binascii.Error, ValueError):
            return _tag_refused(node, path, "!!binary value contains invalid base64 data")
        return raw.decode("utf-8", "replace")
    return _CHECK


def _made_string(written: str, text: str, path: Path) -> Finding:
    """A tag Go does not check turns what reads as a number (or a boolean, or null) into text.
    A warning: `validation` makes it the error where a field then wants the number."""
    value = _shown(text)
    return findings.warning(
        path,
        TAGGED_STRING,
        f"the tag '{written}' makes {value} the string '{value}' to NVIDIA's Go YAML reader "
        "(it reads a scalar whose tag it does not check as the text written)",
        f"remove the tag: write {value}",
    )


def _tag_refused(node: yaml.Node, path: Path, upstream: str) -> Finding:
    value = _shown(node.value)
    tag = node.tag.replace(_YAML_ORG, "!!")
    return findings.error(
        path,
        "yaml.bad-scalar",
        f"'{value}' is not a valid {tag} value: NVIDIA's Go YAML reader refuses the file "
        f'("{upstream}")',
        "remove the tag, or write a value of that type",
    )


def _null_key(text: str, path: Path) -> Finding:
    shown = text or "an empty key"
    return findings.error(
        path,
        "yaml.null-key",
        f"'{shown}' is a null key: the device plugin, mig-parted and Kubernetes convert YAML to "
        'JSON and refuse the whole file ("unsupported map key")',
        "quote the key if it is a name",
    )


def _key_renamed(text: str, key: str, path: Path) -> Finding:
    problem = findings.warning(
        path,
        "yaml.key-not-string",
        f"the key '{text}' is not a string to YAML 1.1: NVIDIA's tools read it as {key} and "
        f"name it '{key}', so looking it up as '{text}' (nvidia-mig-parted apply -c {text}, a "
        f"nvidia.com/mig.config={text} label) finds nothing",
        f"quote the key: '{text}'",
    )
    return dataclasses.replace(problem, at_key=True)


def _not_json(text: str, path: Path) -> Finding:
    return findings.error(
        path,
        "yaml.not-json",
        f"'{text}' is infinity or not-a-number, which JSON cannot hold: the device plugin, "
        "mig-parted and Kubernetes convert YAML to JSON and refuse the whole file "
        '("json: unsupported value")',
        "write a number, or quote the text",
    )


def _bad_scalar(node: yaml.Node, path: Path) -> Finding:
    """A tagged scalar whose text is not of its type (`!!int x`, `!!bool maybe`, `!foo 1`)."""
    value = _shown(node.value)
    tag = node.tag.replace("tag:yaml.org,2002:", "!!")
    return findings.error(
        path,
        "yaml.bad-scalar",
        f"'{value}' is not a valid {tag} value",
        "remove the tag, or write a value of that type (e.g. !!int 4, !!bool true)",
    )


def _number_problem(text: str, tag: str, path: Path) -> Finding | None:
    """A number the YAML parsers read differently, or one too long to be any field's value."""
    if tag == "float" and text.lstrip("+-").lower() in (".inf", ".nan"):
        return _not_json(text, path)
    if len(text) > MAX_NUMBER_CHARS:
        return findings.error(
            path,
            "yaml.number-too-large",
            f"the number '{_shown(text)}' has {len(text)} characters: larger than any field takes "
            "(counts, replicas and indices are at most 19 digits)",
            "write a smaller number",
        )
    if ":" in text:
        return findings.error(
            path,
            "yaml.sexagesimal-number",
            f"'{text}' is a base-60 number to YAML 1.1 parsers in Python, but a string to "
            "the Go parsers NVIDIA's tools use: they disagree on what it means",
            "write the number in decimal, or quote it if it is text",
        )
    digits = text.lstrip("+-").lower()
    base = {"0x": 16, "0o": 8, "0b": 2}.get(digits[:2], 8 if digits[:1] == "0" else 10)
    if tag == "int" and base != 10 and digits != "0":
        value = _int(text)
        return findings.warning(
            path,
            NON_DECIMAL,
            f"'{text}' is read as {value} (base {base}); a reader can easily take it for "
            "something else",
            f"write {value}",
        )
    return None


def _int(text: str) -> int | str:
    import yaml

    try:
        value: int = yaml.constructor.SafeConstructor().construct_yaml_int(
            yaml.ScalarNode("tag:yaml.org,2002:int", text)
        )
    except ValueError:
        return text
    return value


def _shown(text: str) -> str:
    from kubectl_gpu.errors import shortened

    return shortened(text, 40)


def _duplicate_key(key: str, path: Path, first: int) -> Finding:
    problem = findings.error(
        path,
        "yaml.duplicate-key",
        f"duplicate key '{key}' (first defined on line {first}): the device plugin and "
        "mig-parted use the last one, other YAML tools may not",
        "keep one of them",
    )
    return dataclasses.replace(problem, at_key=True)


def _ambiguous_boolean(word: str, path: Path) -> Finding:
    meaning = "true" if word.lower() in ("y", "yes", "on") else "false"
    return findings.warning(
        path,
        "yaml.ambiguous-boolean",
        f"'{word}' is read as {meaning} by YAML 1.1 parsers (the device plugin, mig-parted) "
        "but as a string by YAML 1.2 parsers",
        f"write {meaning}",
    )
