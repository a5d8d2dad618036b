"""Parsing YAML text into documents, safely: the file's own, and those a ConfigMap value holds.

Owns choosing the parser (libyaml when the nesting is safe for its C stack, Go's anchor
rules when PyYAML refuses a redefined anchor), the limits on documents, syntax errors in the
user's words, and the offsets of a nested text in its file. Findings come back unplaced
(`locating.place_all` places them), except those the parser's own marks place.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

from kubectl_gpu import findings
from kubectl_gpu.documents.conversion import MAX_DEPTH, document_from_node
from kubectl_gpu.documents.locating import Document, Unplaced, nested_offsets, walk
from kubectl_gpu.findings import Finding, Path

if TYPE_CHECKING:
    import yaml

MAX_DOCUMENTS = 10_000  # a file of configs or manifests holds tens; a million is an attack
C_LOADER_MAX_INDICATORS = 10_000


def read(text: str, file: str, line_base: int = 0) -> tuple[list[Document], list[Unplaced]]:
    """Parse every YAML document in `text`.

    Returns the documents that could be parsed and the YAML-level findings, unplaced. A
    syntax error stops parsing at that document, as any YAML parser would. `line_base` is
    where `text` starts in its file, for line numbers quoted in messages.
    """
    try:
        return _read(text, file, line_base, _loader_for(text))
    except _AnchorRedefined:
        # Legal YAML that PyYAML refuses; Go's yaml.v2 lets each alias use the latest anchor.
        return _read(text, file, line_base, _go_anchors_loader())


class _AnchorRedefined(Exception):
    pass


def _read(
    text: str, file: str, line_base: int, loader: Any
) -> tuple[list[Document], list[Unplaced]]:
    import yaml

    docs: list[Document] = []
    problems: list[Unplaced] = []
    try:
        for index, root in enumerate(yaml.compose_all(text, Loader=loader)):
            if index == MAX_DOCUMENTS:
                problems.append((None, _too_many_documents(root, file, line_base)))
                break
            doc, found = document_from_node(root, file, line_base, text)
            doc = dataclasses.replace(doc, text=text)
            docs.append(doc)
            problems.extend((doc, f) for f in found)
    except yaml.MarkedYAMLError as e:
        if "duplicate anchor" in str(e) and loader is not _go_anchors_loader():
            raise _AnchorRedefined from e
        problems.append((None, _syntax_finding(e, file)))
    except RecursionError:
        problem = findings.error(
            (),
            "yaml.too-complex",
            "the document nests too deeply to parse",
            f"keep nesting under {MAX_DEPTH} levels",
        )
        problems.append((None, problem.located(file, None, None)))
    except yaml.YAMLError as e:
        problem = findings.error((), "yaml.syntax", f"cannot parse YAML: {e}")
        problems.append((None, problem.located(file, None, None)))
    if not docs and not problems:
        docs.append(Document(file, None))  # an empty file is one empty document
    return docs, problems


@functools.lru_cache(maxsize=1)
def _go_anchors_loader() -> Any:
    """PyYAML's pure-Python safe loader, but a second `&name` replaces the first, as in Go."""
    import yaml

    class GoAnchorsLoader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            if not self.check_event(yaml.AliasEvent):
                event = self.peek_event()  # type: ignore[no-untyped-call]
                self.anchors.pop(event.anchor, None)
            return super().compose_node(parent, index)

    return GoAnchorsLoader


def _too_many_documents(root: Any, file: str, line_base: int) -> Finding:
    line = root.start_mark.line + 1 + line_base if root is not None else None
    return findings.error(
        (),
        "yaml.too-many-documents",
        f"the file holds more than {MAX_DOCUMENTS} YAML documents; the rest was not read",
        "split the file",
    ).located(file, line, None)


def _loader_for(text: str) -> Any:
    """libyaml's parser (about 6x faster on NVIDIA's default MIG config) when it is safe.

    libyaml composes recursively in C and overflows the C stack (a crash, not an
    exception) somewhere past 20,000 nesting levels. Below `C_LOADER_MAX_INDICATORS` as a
    bound on the nesting depth, the C loader is safe; above it, the pure-Python loader
    fails cleanly with RecursionError.
    """
    import yaml

    if _nesting_bound(text) < C_LOADER_MAX_INDICATORS and hasattr(yaml, "CSafeLoader"):
        return yaml.CSafeLoader
    return yaml.SafeLoader


def _nesting_bound(text: str) -> int:
    """An upper bound on how deep the YAML in `text` can nest, in one linear pass.

    A flow collection opens with `[` or `{`; a block collection nested in another starts
    either indented further on a later line or after an indicator (`-`, `?`, `:`) on the
    same line, except that a sequence may sit at its parent key's indentation (hence the
    factor 2). So a 10,000-key ConfigMap, whose lines are short, still gets the fast parser.
    """
    flow = text.count("[") + text.count("{")
    if flow >= C_LOADER_MAX_INDICATORS:
        return flow
    widest = 0
    for line in text.split("\n"):  # other line breaks only make lines look longer: safe
        body = line.lstrip(" ")
        opened = len(line) - len(body) + body.count("-") + body.count("?") + body.count(":")
        widest = max(widest, opened)
    return flow + 2 * (widest + 1)


def read_nested(outer: Document, path: Path, text: str) -> tuple[list[Document], list[Unplaced]]:
    """Parse `text`, the string value at `path` in `outer`, keeping lines relative to the file."""
    value_node = walk(outer.root, path, False)
    line_base, column_base, exact = nested_offsets(outer, value_node)
    docs, problems = read(text, outer.file, line_base if exact else 0)
    shifted = {
        id(d): dataclasses.replace(
            d, line_base=line_base, column_base=column_base, exact=exact, at=path
        )
        for d in docs
    }
    relocated: list[Unplaced] = [
        (shifted[id(d)], f)
        if d is not None
        else (None, _shift_finding(f, outer, line_base, column_base, exact).under(path))
        for d, f in problems
    ]
    return [shifted[id(d)] for d in docs], relocated


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


def _shift_finding(
    f: Finding, outer: Document, line_base: int, column_base: int, exact: bool
) -> Finding:
    if f.line is None:
        return f.located(outer.file, line_base + 1, None)
    if not exact:
        return f.located(outer.file, line_base + 1, None)
    column = f.column + column_base if f.column is not None else None
    return f.located(outer.file, f.line + line_base, column)
