"""YAML documents with line marks: parsing configs safely and locating a path in the text.

Owns YAML parsing (safe loaders only), the YAML-level checks no schema can see (syntax,
duplicate keys, YAML 1.1 booleans, alias bombs, pathological nesting), and mapping a
JSON path, including one inside a ConfigMap value, back to a file, line and column.
Must not validate shapes (that is `schema.py`) or build domain objects. `yaml` is
imported inside functions so that `--help` stays fast.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

from kubectl_gpu import findings, scalars
from kubectl_gpu.findings import Finding, Path

if TYPE_CHECKING:
    import yaml

MAX_NODES = 200_000  # after alias expansion; a ConfigMap holds at most 1 MiB of text
MAX_DEPTH = 64
C_LOADER_MAX_INDICATORS = 10_000
_YAML11_BOOLEANS = {"yes", "no", "on", "off"}  # y and n: see scalars.py


@dataclasses.dataclass(frozen=True)
class Document:
    """One YAML document: its plain data and the node tree that knows where things are.

    A document nested in another (a ConfigMap value) carries the offsets that map
    its own line/column numbers back to the outer file; `exact` is False when the
    nesting style (a quoted or plain scalar) makes that mapping approximate.
    """

    file: str
    data: Any
    root: Any = None  # yaml.Node | None; typed loosely to keep yaml out of signatures
    text: str = ""  # the text the node marks refer to
    line_base: int = 0  # 0-based line in the file of the document's line 0
    column_base: int = 0
    exact: bool = True

    def locate(self, path: Path, *, at_key: bool = False) -> tuple[int | None, int | None]:
        """Return the 1-based (line, column) of `path`, or of its deepest existing part."""
        node = _walk(self.root, path, at_key)
        if node is None:
            return (self.line_base + 1, None) if self.line_base else (None, None)
        mark = node.start_mark
        if not self.exact:
            return self.line_base + 1, None
        return mark.line + 1 + self.line_base, mark.column + 1 + self.column_base

    def place(self, finding: Finding) -> Finding:
        """Fill in file, line and column of a finding made about this document."""
        line, column = self.locate(finding.path, at_key=finding.at_key)
        return finding.located(self.file, line, column)


class _TooComplex(Exception):
    pass


def load_documents(
    text: str, file: str, line_base: int = 0
) -> tuple[list[Document], list[Finding]]:
    """Parse every YAML document in `text`.

    Returns the documents that could be parsed and the YAML-level findings, already
    located. A syntax error stops parsing at that document, as any YAML parser would.
    `line_base` is where `text` starts in its file, for line numbers quoted in messages.
    """
    import yaml

    docs: list[Document] = []
    problems: list[Finding] = []
    try:
        for root in yaml.compose_all(text, Loader=_loader_for(text)):
            doc, found = _document_from_node(root, file, line_base)
            doc = dataclasses.replace(doc, text=text)
            docs.append(doc)
            problems.extend(doc.place(f) for f in found)
    except yaml.MarkedYAMLError as e:
        problems.append(_syntax_finding(e, file))
    except RecursionError:
        problems.append(
            findings.error(
                (),
                "yaml.too-complex",
                "the document nests too deeply to parse",
                f"keep nesting under {MAX_DEPTH} levels",
            ).located(file, None, None)
        )
    except yaml.YAMLError as e:
        problems.append(
            findings.error((), "yaml.syntax", f"cannot parse YAML: {e}").located(file, None, None)
        )
    if not docs and not problems:
        docs.append(Document(file, None))  # an empty file is one empty document
    return docs, problems


def _loader_for(text: str) -> Any:
    """libyaml's parser (about 6x faster on NVIDIA's default MIG config) when it is safe.

    libyaml composes recursively in C and overflows the C stack (a crash, not an
    exception) somewhere past 20,000 nesting levels. A document cannot nest deeper than
    it has indicators that open a level, so below that count the C loader is safe; above
    it, the pure-Python loader fails cleanly with RecursionError.
    """
    import yaml

    indicators = sum(text.count(c) for c in "[{-?:")
    if indicators < C_LOADER_MAX_INDICATORS and hasattr(yaml, "CSafeLoader"):
        return yaml.CSafeLoader
    return yaml.SafeLoader


def load_nested(outer: Document, path: Path, text: str) -> tuple[list[Document], list[Finding]]:
    """Parse `text`, the string value at `path` in `outer`, keeping lines relative to the file."""
    value_node = _walk(outer.root, path, False)
    line_base, column_base, exact = _nested_offsets(outer, value_node)
    shifted = functools.partial(
        dataclasses.replace, line_base=line_base, column_base=column_base, exact=exact
    )
    docs, problems = load_documents(text, outer.file, line_base if exact else 0)
    docs = [shifted(d) for d in docs]
    relocated = [_shift_finding(f, outer, line_base, column_base, exact) for f in problems]
    return docs, relocated


def _document_from_node(
    root: yaml.Node | None, file: str, line_base: int
) -> tuple[Document, list[Finding]]:
    found: list[Finding] = []
    if root is None:
        return Document(file, None), found
    try:
        data = _Converter(found, line_base).convert(root, ())
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

    def __init__(self, found: list[Finding], line_base: int) -> None:
        import yaml

        self._line_base = line_base
        self._yaml = yaml
        self._constructor = yaml.constructor.SafeConstructor()
        self._found = found
        self._budget = MAX_NODES
        self._merged: dict[int, int] = {}  # id(mapping node) -> how many pairs came from <<

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

    def _mapping(self, node: yaml.MappingNode, path: Path) -> dict[str, Any]:
        merged = self._flatten(node)
        result: dict[str, Any] = {}
        first_line: dict[str, int] = {}
        for index, (key_node, value_node) in enumerate(node.value):
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
            key = key_node.value
            if key in first_line:
                self._found.append(_duplicate_key(key, (*path, key), first_line[key]))
            if index >= merged:  # a key merged in by << may be overridden; that is its purpose
                first_line.setdefault(key, key_node.start_mark.line + 1 + self._line_base)
            result[key] = self.convert(value_node, (*path, key))
        return result

    def _flatten(self, node: yaml.MappingNode) -> int:
        """Resolve YAML merge keys (<<) as Go's yaml does; return how many pairs they added.

        The merged pairs come first, so a key written after them overrides them. A node
        reached again through an alias is already flattened: its count is remembered.
        """
        if id(node) not in self._merged:
            written = len(node.value)
            merges = sum(1 for k, _ in node.value if k.tag == "tag:yaml.org,2002:merge")
            self._constructor.flatten_mapping(node)
            self._merged[id(node)] = len(node.value) - (written - merges)
        return self._merged[id(node)]

    def _scalar(self, node: yaml.Node, path: Path) -> Any:
        tag = node.tag.rsplit(":", 1)[-1]
        if tag in ("timestamp", "binary"):
            return node.value  # keep JSON-compatible: the schemas never want dates
        if tag == "bool" and node.value.lower() in _YAML11_BOOLEANS:
            self._found.append(_ambiguous_boolean(node.value, path))
        if not getattr(node, "style", None) and node.tag.startswith("tag:yaml.org,2002:"):
            as_go = scalars.go_plain(node.value, tag)  # where PyYAML and upstream's yaml differ
            if isinstance(as_go, bool):
                self._found.append(_ambiguous_boolean(node.value, path))
            if as_go is not scalars.UNCHANGED:
                return as_go
        return self._constructor.construct_object(node)


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


def _syntax_finding(e: yaml.MarkedYAMLError, file: str) -> Finding:
    mark = e.problem_mark or e.context_mark
    problem = e.problem or str(e)
    context = f" ({e.context})" if e.context else ""
    line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
    return findings.error(
        (),
        "yaml.syntax",
        f"invalid YAML: {problem}{context}",
        "fix the YAML syntax at that position",
    ).located(file, line, column)


def _walk(root: Any, path: Path, at_key: bool) -> Any:
    import yaml

    node = root
    for depth, item in enumerate(path):
        last = depth == len(path) - 1
        if isinstance(node, yaml.MappingNode):
            keyed = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)]
            match = [(k, v) for k, v in keyed if k.value == str(item)] or [
                # upstream matches some keys case-insensitively; findings use its spelling
                (k, v)
                for k, v in keyed
                if k.value.lower() == str(item).lower()
            ]
            if not match:
                return node
            key_node, value_node = match[-1]
            node = key_node if (last and at_key) else value_node
        elif isinstance(node, yaml.SequenceNode) and isinstance(item, int):
            if not 0 <= item < len(node.value):
                return node
            node = node.value[item]
        else:
            return node
    return node


def _nested_offsets(outer: Document, node: Any) -> tuple[int, int, bool]:
    if node is None:
        return outer.line_base, outer.column_base, False
    mark = node.start_mark
    base_line = mark.line + outer.line_base
    if getattr(node, "style", None) not in ("|", ">") or not outer.exact:
        return base_line, 0, False
    # A block scalar's content starts on the next line, every line indented alike.
    content = [ln for ln in outer.text.splitlines()[mark.line + 1 :] if ln.strip()]
    indent = len(content[0]) - len(content[0].lstrip(" ")) if content else 0
    exact = getattr(node, "style", None) == "|"
    return base_line + 1, indent + outer.column_base, exact


def _shift_finding(
    f: Finding, outer: Document, line_base: int, column_base: int, exact: bool
) -> Finding:
    if f.line is None:
        return f.located(outer.file, line_base + 1, None)
    if not exact:
        return f.located(outer.file, line_base + 1, None)
    column = f.column + column_base if f.column is not None else None
    return f.located(outer.file, f.line + line_base, column)
