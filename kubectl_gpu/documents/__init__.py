"""YAML documents with line marks: parsing configs safely and locating a path in the text.

Owns YAML parsing (safe loaders only), the YAML-level checks no schema can see (syntax,
duplicate keys, YAML 1.1 booleans, alias bombs, pathological nesting), and mapping a
JSON path, including one inside a ConfigMap value, back to a file, line and column.
Must not validate shapes (that is `schema.py`) or build domain objects. `yaml` is
imported inside functions so that `--help` stays fast.

This module is the public face; the nouns live beside it: `encoding` (a file's bytes to text,
as NVIDIA's reader decodes them), `parsing` (text to documents),
`conversion` (nodes to plain data), `tags` (explicit tags as Go reads them), `values` (the
YAML-level findings about plain values and keys), `locating` (`Document`,
and placing findings in the file once every check has run).
"""

from __future__ import annotations

from kubectl_gpu.documents.conversion import MAX_DEPTH, MAX_NODES
from kubectl_gpu.documents.encoding import decode
from kubectl_gpu.documents.locating import Document, Unplaced, place_all
from kubectl_gpu.documents.parsing import (
    C_LOADER_MAX_INDICATORS,
    MAX_DOCUMENTS,
    read,
    read_nested,
)
from kubectl_gpu.documents.tags import TAGGED_STRING
from kubectl_gpu.documents.values import MAX_NUMBER_CHARS, NON_DECIMAL, VALUE_CODES
from kubectl_gpu.findings import Finding, Path

__all__ = [
    "C_LOADER_MAX_INDICATORS",
    "MAX_DEPTH",
    "MAX_DOCUMENTS",
    "MAX_NODES",
    "MAX_NUMBER_CHARS",
    "NON_DECIMAL",
    "TAGGED_STRING",
    "VALUE_CODES",
    "Document",
    "Unplaced",
    "decode",
    "load_documents",
    "load_nested",
    "place_all",
    "read",
    "read_nested",
]


def load_documents(
    text: str, file: str, line_base: int = 0
) -> tuple[list[Document], list[Finding]]:
    """Parse every YAML document in `text`; the YAML-level findings come back placed."""
    docs, found = read(text, file, line_base)
    return docs, place_all(found)


def load_nested(outer: Document, path: Path, text: str) -> tuple[list[Document], list[Finding]]:
    """Parse `text`, the string value at `path` in `outer`; its findings come back placed in
    the outer file, their paths from the outer document's root."""
    docs, found = read_nested(outer, path, text)
    return docs, place_all(found)
