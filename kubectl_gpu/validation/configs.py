"""One config document as upstream reads it: its reading, its structure, its rules.

Owns checking a document of a known kind on its plain data (upstream's reading, then the
schema, then the domain rules) and what a stream of documents means to tools that read only
the first. Every finding comes back unplaced, with the document whose nodes place it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubectl_gpu import findings, schema
from kubectl_gpu.documents import Document, Unplaced
from kubectl_gpu.findings import Finding
from kubectl_gpu.validation.kinds import Kind


def about(doc: Document, found: list[Finding]) -> list[Unplaced]:
    """Findings made on `doc`'s plain data, to be placed by its nodes."""
    return [(doc, f) for f in found]


def validate_as(doc: Document, kind: Kind) -> list[Unplaced]:
    """Every finding about `doc` read as `kind`: upstream's reading, structure, rules."""
    if doc.data is None:
        return []
    data, found = kind.read(doc.data)
    if kind.schema:
        found = found + schema.check_structure(data, kind.schema)
    if isinstance(data, Mapping):
        found = found + kind.check(data)
    return about(doc, found)


def before(docs: list[Document], found: list[Unplaced]) -> list[Unplaced]:
    """The findings about the first document (the YAML loader's, about later documents,
    go: upstream never parses them), and the one saying the file was not read to its end.

    A finding the parser placed itself stays when it lies before the second document."""
    first, second = docs[0], docs[1]
    start, _ = second.locate(())
    if start is None or not second.exact:
        return found
    kept = [
        (doc, f)
        for doc, f in found
        if doc is first or (doc is None and (f.line is None or f.line < start))
    ]
    return kept + [
        (doc, f)
        for doc, f in found
        if f.code == "yaml.too-many-documents" and not any(f is k for _, k in kept)
    ]


def ignored_document(doc: Document, kind: Kind) -> Unplaced:
    """Upstream reads only the first YAML document of a config file; say so about the rest."""
    problem = findings.warning(
        (),
        "document.ignored",
        f"this is a second YAML document in a {kind.title} file: upstream reads only the "
        "first document of the file and ignores this one and any after it",
        "put each config in its own file or ConfigMap key",
    )
    return doc, problem


def unrecognised(data: Any) -> Finding:
    """A document that is none of the kinds `validate` knows."""
    what = (
        f"a {data.get('kind')}" if isinstance(data, dict) and "kind" in data else ("this document")
    )
    return findings.error(
        (),
        "document.unrecognised",
        f"{what} is not a config kubectl gpu can validate",
        "expected a device-plugin config (version/flags/sharing), a mig-parted config "
        "(version/mig-configs), a ConfigMap holding either, or a DRA ResourceClaim, "
        "ResourceClaimTemplate or DeviceClass (alone or in a List); use --kind to force one",
    )
