"""Parsing YAML text into documents, safely: the file's own, and those a ConfigMap value holds.

Owns choosing the parser (libyaml when the nesting is safe for its C stack; a Python parser
with the grammar of NVIDIA's Go reader, go.yaml.in/yaml/v2 (`goloader`), where the text uses
a part of YAML on which the two disagree: directives, the `\\/` and `\\'` escapes, a redefined
anchor), byte-order marks Go's reader misreads, the limits on documents, syntax errors in the
user's words, and the offsets of a nested text in its file. Findings come back unplaced
(`locating.place_all` places them), except those the parser's own marks place.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any

from kubectl_gpu import findings
from kubectl_gpu.documents import goloader
from kubectl_gpu.documents.conversion import MAX_DEPTH, MAX_NODES, document_from_node
from kubectl_gpu.documents.locating import Document, Unplaced, nested_offsets, walk
from kubectl_gpu.findings import Finding, Path

if TYPE_CHECKING:
    import yaml

MAX_DOCUMENTS = 10_000  # a file of configs or manifests holds tens; a million is an attack
C_LOADER_MAX_INDICATORS = 10_000
# Where libyaml's grammar (YAML 1.1 with parts of 1.2) and Go's yaml.v2 (YAML 1.1) differ, in
# text a config may hold: a directive, a `\\/` escape (1.2 only: Go refuses it), a `\\'`
# escape (Go reads it, PyYAML refuses it), a tag with a comma in it (`!!str,`: Go's tags may
# hold commas, libyaml's may not). Text that holds none is read by libyaml as before.
_GO_GRAMMAR = re.compile("^\ufeff*%|\\\\[/']|![^\\s]*,", re.MULTILINE)
# Byte-order marks at the start of a line (or right after the file's own BOM).
_STRAY_BOMS = re.compile("(?:(?<=[\r\n])|(?<=^\ufeff))\ufeff+")


def read(text: str, file: str, line_base: int = 0) -> tuple[list[Document], list[Unplaced]]:
    """Parse every YAML document in `text`.

    Returns the documents that could be parsed and the YAML-level findings, unplaced. A
    syntax error stops parsing at that document, as any YAML parser would. `line_base` is
    where `text` starts in its file, for line numbers quoted in messages.
    """
    strays = _stray_boms(text, file, line_base) if "\ufeff" in text[1:] else []
    if strays:  # reported; the rest of the file is read as written, without them
        text = _STRAY_BOMS.sub("", text)
    # The encoding mark: every reader skips it. Without it the node marks index the text
    # alike whichever parser reads it (libyaml counts from after it, PyYAML from before).
    text = text.removeprefix("\ufeff")
    try:
        docs, found = _read(text, file, line_base, _loader_for(text))
    except _AnchorRedefined:
        # Legal YAML that PyYAML refuses; Go's yaml.v2 lets each alias use the latest anchor.
        docs, found = _read(text, file, line_base, goloader.loader())
    return docs, strays + found


class _AnchorRedefined(Exception):
    pass


def _read(
    text: str, file: str, line_base: int, loader: Any
) -> tuple[list[Document], list[Unplaced]]:
    import yaml

    docs: list[Document] = []
    problems: list[Unplaced] = []
    oversized = _oversized_document(text, loader) if len(text) > _SMALL_TEXT else None
    if oversized is not None:
        problem, line = oversized
        return [], [(None, problem.located(file, line + 1 + line_base, None))]
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
        if "duplicate anchor" in str(e) and loader is not goloader.loader():
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


# A YAML value takes at least two characters of text (`0,`), so a text shorter than twice
# MAX_NODES cannot hold more than MAX_NODES values before aliases (which the conversion
# counts as it expands them); a longer one is counted first as a stream of parser events.
_SMALL_TEXT = 2 * MAX_NODES
_NODE_EVENTS = ("ScalarEvent", "SequenceStartEvent", "MappingStartEvent", "AliasEvent")


def _oversized_document(text: str, loader: Any) -> tuple[Finding, int] | None:
    """A document of `text` with more than MAX_NODES values (the finding, and the document's
    first line from 0), found from the parser's events before any node is built: composing a
    4 MiB flow list of two million numbers took 1.2 GiB (docs/performance.md), and the
    conversion's own count came only after that."""
    import yaml

    counted = line = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            name = type(event).__name__
            if name == "DocumentStartEvent":
                counted, line = 0, event.start_mark.line if event.start_mark else 0
            elif name in _NODE_EVENTS:
                counted += 1
                if counted > MAX_NODES:
                    problem = findings.error(
                        (),
                        "yaml.too-complex",
                        f"the document holds more than {MAX_NODES} values",
                        "split the file, or list fewer values (a config holds hundreds)",
                    )
                    return problem, line
    except (yaml.YAMLError, RecursionError):
        return None  # the parse proper reports it, in its own words
    return None


def _stray_boms(text: str, file: str, line_base: int) -> list[Unplaced]:
    """A byte-order mark at the start of a line, other than the file's first character.

    Go's yaml.v2 then misreads the file, in one of two ways (the device-plugin oracle's
    `-read-yaml` shows both): after two or more marks at the start of the file it reads
    every later line without its first character (`sharing:` is `haring:`); a mark at the
    start of a later line becomes the first character of that line's text, indentation
    included (`\ufeff  timeSlicing` as a top-level key). The config NVIDIA runs is then not
    the one written, so it is an error that says what NVIDIA reads instead.
    Placed by line; `configs.before` drops those after the first document (never read).
    """
    found: list[Unplaced] = []
    lines = text.split("\n")
    for match in _STRAY_BOMS.finditer(text):  # never the file's first character
        index = text.count("\n", 0, match.start())
        line = index + 1 + line_base
        if match.start() == 1:  # right after the file's own mark
            what = _first_characters_dropped(lines, line_base)
            problem_text = f"{len(match.group()) + 1} byte-order marks (U+FEFF) start the file"
        else:
            written = lines[index][match.end() - match.start() :] if index < len(lines) else ""
            what = (
                "it reads the mark as the first character of that line's text, indentation "
                f"included ('{_short(written.strip())}' becomes the top-level key "
                f"'\\ufeff{_short(written.split(':', 1)[0])}', which upstream ignores)"
                if ":" in written
                else "it reads the mark as part of that line's text"
            )
            problem_text = f"a byte-order mark (U+FEFF) starts line {line}"
        problem = findings.error(
            (),
            "yaml.stray-bom",
            f"{problem_text}: NVIDIA's Go YAML reader misreads the file: {what}; so the "
            "device plugin or mig-parted runs a config other than the one written",
            "remove the byte-order mark: save the file as UTF-8 without BOM",
        )
        found.append((None, problem.located(file, line, 1)))
    return found


def _first_characters_dropped(lines: list[str], line_base: int) -> str:
    """What two marks at the start do: every later line is read without its first character."""
    for index, line in enumerate(lines[1:], start=2):
        if line.strip() and not line.lstrip().startswith("#"):
            return (
                "it reads every line after the first without its first character (line "
                f"{index + line_base} '{_short(line)}' as '{_short(line[1:])}')"
            )
    return "it reads every line after the first without its first character"


def _short(text: str) -> str:
    from kubectl_gpu.errors import shortened

    return shortened(text.rstrip("\r"), 40)


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

    if _GO_GRAMMAR.search(text) or _question_in_flow(text):
        return goloader.loader()
    if _nesting_bound(text) < C_LOADER_MAX_INDICATORS and hasattr(yaml, "CSafeLoader"):
        return yaml.CSafeLoader
    return yaml.SafeLoader


def _question_in_flow(text: str) -> bool:
    """Text where a `?` may stand inside `[...]` or `{...}`: Go's reader (as PyYAML's own
    scanner, unlike libyaml 0.2.5) ends a plain scalar there, so `[a?b]` is a syntax error."""
    return "?" in text and ("[" in text or "{" in text)


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


def read_nested(
    outer: Document, path: Path, text: str, *, exact: bool = True, first_only: bool = False
) -> tuple[list[Document], list[Unplaced]]:
    """Parse `text`, the string value at `path` in `outer`, keeping lines relative to the file.
    `exact=False`: the text is not written as such in the file (base64), so its findings are
    placed on the value's first line. `first_only`: the text is a config file, of which
    upstream reads only the first document: what the parser found after it is dropped here,
    while its own lines are still known."""
    value_node = walk(outer.root, path, False)
    line_base, column_base, placed = nested_offsets(outer, value_node)
    exact = exact and placed
    docs, problems = read(text, outer.file, line_base if exact else 0)
    if first_only and len(docs) > 1 and docs[1].root is not None:
        start = docs[1].root.start_mark.line + 1 + (line_base if exact else 0)
        problems = [
            (d, f)
            for d, f in problems
            if d is not None
            or f.line is None
            or f.line < start
            or f.code == "yaml.too-many-documents"
        ]
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
