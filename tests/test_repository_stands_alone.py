"""A clone holds everything its comments cite: no comment, docstring or doc page points at the
design notes, style notes or reference files that lived outside the repository (by their file
names or by bare section numbers), and every `docs/upstream-facts.md` label and every `docs/…`
page that the code cites exists."""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("kubectl_gpu", "tests", "benchmarks", "scripts", "docs", "proto", "schemas")
TOP_FILES = ("README.md", "Makefile", "setup.cfg", "pyproject.toml", "plugin.yaml")
TEXT_SUFFIXES = {".md", ".yaml", ".yml", ".sh", ".proto", ".c", ".h", ".json", ".toml", ".cfg"}
SKIPPED_PARTS = {"_proto", "__pycache__", "oracles", ".venv"}

# Built from pieces so that this module does not cite what it forbids.
OUTSIDE = re.compile(
    "|".join(
        (
            r"\b" + "DESIGN" + r"\.md",
            r"\b" + "STYLE" + r"\.md",
            r"\breference" + r"/",
            r"\breference" + r" (?:\w[\w-]*\.md )?\u00a7",
            "/work" + "/shared",
            r"\bshared" + r"/(?:fixtures|reference)",
            "\u00a7" + r" ?\d",
        )
    )
)
LABEL = re.compile(
    r"docs/upstream-facts\.md\s+((?:[PMN]\d+(?:\.\d+)?(?:[-–][PMN]\d+(?:\.\d+)?)?"
    r"(?:,\s+|\s+and\s+)?)+)"
)
DOC_PAGE = re.compile(r"\bdocs/([\w-]+\.md)")
# Python 3.12 splits an f-string into its own tokens; its text is FSTRING_MIDDLE.
PROSE_TOKENS = {tokenize.COMMENT, tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", -1)}


def _files() -> Iterator[Path]:
    for name in TOP_FILES:
        if (ROOT / name).is_file():
            yield ROOT / name
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*")):
            if SKIPPED_PARTS & set(path.relative_to(ROOT).parts) or not path.is_file():
                continue
            if path.suffix == ".py" or path.suffix in TEXT_SUFFIXES:
                yield path


def _prose(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of what a reader reads: a Python file's comments and string literals (its
    docstrings among them), any other text file whole."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix != ".py":
        yield from enumerate(text.splitlines(), start=1)
        return
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in PROSE_TOKENS:
            for offset, line in enumerate(token.string.splitlines()):
                yield token.start[0] + offset, line


def outside_citations(paths: list[Path]) -> list[str]:
    found = []
    for path in paths:
        for number, line in _prose(path):
            if OUTSIDE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return found


def _sections() -> set[str]:
    text = (ROOT / "docs" / "upstream-facts.md").read_text(encoding="utf-8")
    return set(re.findall(r"^#+ ([PMN]\d+(?:\.\d+)?)[. ]", text, flags=re.MULTILINE))


def test_nothing_cites_a_file_outside_the_repository() -> None:
    found = outside_citations(list(_files()))
    assert not found, (
        "these cite notes a clone does not contain; cite docs/ (docs/architecture.md, "
        "docs/upstream-facts.md, …) or an upstream URL instead:\n" + "\n".join(found)
    )


def test_every_cited_upstream_fact_has_its_section() -> None:
    sections = _sections()
    missing = []
    for path in _files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in LABEL.finditer(re.sub(r"\n\s*(?:#\s*)?", " ", text)):
            for label in re.findall(r"[PMN]\d+(?:\.\d+)?", match.group(1)):
                if label not in sections:
                    missing.append(f"{path.relative_to(ROOT)}: {label}")
    assert not missing, "cited, but docs/upstream-facts.md has no such section:\n" + "\n".join(
        missing
    )


def test_every_cited_doc_page_exists() -> None:
    missing = sorted(
        f"{path.relative_to(ROOT)}: docs/{page}"
        for path in _files()
        for page in DOC_PAGE.findall(path.read_text(encoding="utf-8", errors="replace"))
        if not (ROOT / "docs" / page).is_file()
    )
    assert not missing, "cited, but not in docs/:\n" + "\n".join(missing)


@pytest.mark.parametrize(
    "line",
    [
        "# Facts follow " + "reference" + "/node-state.md \u00a71.",
        '"""As ' + "DESIGN" + '.md says."""',
        "# (" + "STYLE" + ".md \u00a74)",
        "# the plugin reads its config only at start (\u00a7" + "3.3)",
        "# from " + "/work" + "/sha" + "red/fixtures/configs/",
    ],
)
def test_a_citation_of_the_outside_notes_is_caught(tmp_path: Path, line: str) -> None:
    module = tmp_path / "cites.py"
    module.write_text(f"{line}\nX = 1\n")
    found = [n for n, text in _prose(module) if OUTSIDE.search(text)]
    assert found == [1]
