"""Where a finding is in its file: a JSON path looked up in a document's YAML nodes.

Owns `Document` (the plain data, and the node tree that knows where things are) and placing
findings made on plain data (file, line, column), all at once after every check has run:
`place_all`. A document nested in another (a ConfigMap value) carries the offsets that map
its own positions back to the outer file. Must not parse YAML (`parsing.py`) or judge values.
"""

from __future__ import annotations

import dataclasses
import functools
import weakref
from collections.abc import Iterable
from typing import Any

from kubectl_gpu import scalars
from kubectl_gpu.findings import Finding, Path


@dataclasses.dataclass(frozen=True)
class Document:
    """One YAML document: its plain data and the node tree that knows where things are.

    A document nested in another (a ConfigMap value) carries the offsets that map
    its own line/column numbers back to the outer file, and `at`, the path of that value
    in the outer document; `exact` is False when the nesting style (a quoted or plain
    scalar) makes that mapping approximate.
    """

    file: str
    data: Any
    root: Any = None  # yaml.Node | None; typed loosely to keep yaml out of signatures
    text: str = ""  # the text the node marks refer to
    line_base: int = 0  # 0-based line in the file of the document's line 0
    column_base: int = 0
    exact: bool = True
    at: Path = ()  # where the text of a nested document is in the outer document

    def locate(self, path: Path, *, at_key: bool = False) -> tuple[int | None, int | None]:
        """Return the 1-based (line, column) of `path`, or of its deepest existing part."""
        node = walk(self.root, path, at_key)
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


# A finding about a document, not placed yet: its path is looked up in that document's nodes
# by `place_all`. None: the parser's own mark placed it already (a syntax error).
Unplaced = tuple[Document | None, Finding]


def place_all(found: Iterable[Unplaced]) -> list[Finding]:
    """Place every finding in its file, in order: each distinct path is looked up once."""
    positions: dict[tuple[int, Path, bool], tuple[int | None, int | None]] = {}
    placed: list[Finding] = []
    for doc, finding in found:
        if doc is None:
            placed.append(finding)
            continue
        key = (id(doc), finding.path, finding.at_key)
        if key not in positions:
            positions[key] = doc.locate(finding.path, at_key=finding.at_key)
        placed.append(finding.located(doc.file, *positions[key]).under(doc.at))
    return placed


def walk(root: Any, path: Path, at_key: bool) -> Any:
    import yaml

    node = root
    for depth, item in enumerate(path):
        last = depth == len(path) - 1
        if isinstance(node, yaml.MappingNode):
            # upstream matches some keys case-insensitively; findings use its spelling
            match = _keys_of(node).get(str(item)) or _keys_of(node, folded=True).get(
                str(item).lower()
            )
            if match is None:
                return node
            key_node, value_node = match
            node = key_node if (last and at_key) else value_node
        elif isinstance(node, yaml.SequenceNode) and isinstance(item, int):
            if not 0 <= item < len(node.value):
                return node
            node = node.value[item]
        else:
            return node
    return node


# Each mapping node's keys, built on the first lookup: locating every finding of a 20,000-key
# mapping by scanning its pairs would cost 20,000 x 20,000 comparisons.
_Index = dict[str, tuple[Any, Any]]
_KEY_INDEX: weakref.WeakKeyDictionary[Any, tuple[_Index, _Index]] = weakref.WeakKeyDictionary()


def _keys_of(node: Any, folded: bool = False) -> _Index:
    """The mapping's keys as written, or lower-cased (`folded`) to find a key upstream matches
    case-insensitively; the last of duplicate keys wins, as in the loaded data."""
    import yaml

    found = _KEY_INDEX.get(node)
    if found is None or len(found[0]) > len(node.value):  # flattened or edited since
        keyed = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)]
        exact = {_go_name(k): (k, v) for k, v in keyed}  # `on:` is found as `true`, as loaded
        exact.update((k.value, (k, v)) for k, v in keyed)
        found = (exact, {k.value.lower(): (k, v) for k, v in keyed})
        _KEY_INDEX[node] = found
    return found[1] if folded else found[0]


def _go_name(key: Any) -> str:
    if getattr(key, "style", None):
        return str(key.value)
    return scalars.go_key(key.value, key.tag.rsplit(":", 1)[-1]) or str(key.value)


def nested_offsets(outer: Document, node: Any) -> tuple[int, int, bool]:
    if node is None:
        return outer.line_base, outer.column_base, False
    mark = node.start_mark
    base_line = mark.line + outer.line_base
    if getattr(node, "style", None) not in ("|", ">") or not outer.exact:
        return base_line, 0, False
    # A block scalar's content starts on the next line, every line indented alike.
    lines = _lines(outer.text)
    after = range(mark.line + 1, len(lines))
    first = next((lines[i] for i in after if lines[i].strip()), "")
    indent = len(first) - len(first.lstrip(" "))
    exact = getattr(node, "style", None) == "|"
    return base_line + 1, indent + outer.column_base, exact


@functools.lru_cache(maxsize=4)
def _lines(text: str) -> list[str]:
    """The lines of a file, split once: each of its ConfigMap values needs them."""
    return text.splitlines()
