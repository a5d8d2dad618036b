"""One config document as upstream reads it: its reading, its structure, its rules.

Owns checking a document of a known kind on its plain data (upstream's reading, then the
schema, then the domain rules) and what a stream of documents means to tools that read only
the first. Every finding comes back unplaced, with the document whose nodes place it.
"""

from __future__ import annotations

import dataclasses
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
    nulls = _null_device_indices(data, kind)
    if kind.schema:
        structure = schema.check_structure(data, kind.schema)
        found = found + [
            _said_dropped(f, kind)
            for f in structure
            if not (f.code == _WRONG_TYPE and f.path in nulls)
        ]
    if isinstance(data, Mapping):
        found = found + kind.check(data)
    return about(doc, found + list(nulls.values()))


_WRONG_TYPE = "schema.wrong-type"
_DROPPED = frozenset({"schema.unknown-field", "schema.misplaced-field"})


def _said_dropped(f: Finding, kind: Kind) -> Finding:
    """An unknown or misplaced key in a device-plugin config: say that the plugin drops it
    (its JSON decoding ignores fields it has none for) rather than refusing the file."""
    if kind.name != "device-plugin-config" or f.code not in _DROPPED:
        return f
    message = f"{f.message}: the device plugin ignores it and starts as if it were not written"
    return dataclasses.replace(f, message=message)


def _null_device_indices(data: Any, kind: Kind) -> dict[tuple[Any, ...], Finding]:
    """`devices: [0, null]`: Go decodes null into an int as 0, so upstream targets GPU 0 (a
    second time, here). An error that says so, in place of "expected an integer"."""
    if not isinstance(data, Mapping):
        return {}
    if kind.name == "mig-config":
        code, tool = "mig.null-device-index", "mig-parted"
        entries = _entries(data, ("mig-configs",), ())
    elif kind.name == "device-plugin-config":
        code, tool = "sharing.null-device-index", "the device plugin"
        entries = _entries(data, ("sharing",), ("resources",))
    else:
        return {}
    found: dict[tuple[Any, ...], Finding] = {}
    for at, entry in entries:
        devices = entry.get("devices") if isinstance(entry, Mapping) else None
        if not isinstance(devices, list) or None not in devices:
            continue
        twice = " a second time" if devices.count(None) + devices.count(0) > 1 else ""
        for index in (i for i, item in enumerate(devices) if item is None):
            path = (*at, "devices", index)
            found[path] = findings.error(
                path,
                code,
                f"null is not a GPU index: {tool} reads it as 0, so this entry targets "
                f"GPU 0{twice}",
                "write the GPU index, or remove the item",
            )
    return found


def _entries(
    data: Mapping[str, Any], table: tuple[str, ...], inner: tuple[str, ...]
) -> list[tuple[tuple[Any, ...], Any]]:
    """The list entries two levels down: `mig-configs.NAME[i]`, `sharing.BLOCK.resources[i]`."""
    found: list[tuple[tuple[Any, ...], Any]] = []
    outer = data.get(table[0])
    for name, value in outer.items() if isinstance(outer, Mapping) else ():
        for key in inner:
            value = value.get(key) if isinstance(value, Mapping) else None
        if isinstance(value, list):
            found += [((*table, name, *inner, i), entry) for i, entry in enumerate(value)]
    return found


def before(docs: list[Document], found: list[Unplaced]) -> list[Unplaced]:
    """The findings about the first document (the YAML loader's, about later documents,
    go: upstream never parses them), and the one saying the file was not read to its end.

    A finding the parser placed itself stays when it lies before the second document (in a
    nested text placed only roughly, `documents.read_nested(first_only=True)` has dropped
    those after it already)."""
    first, second = docs[0], docs[1]
    start, _ = second.locate(())
    if start is None or not second.exact:
        start = None
    kept = [
        (doc, f)
        for doc, f in found
        if doc is first or (doc is None and (start is None or f.line is None or f.line < start))
    ]
    return kept + [
        (doc, f)
        for doc, f in found
        if f.code == "yaml.too-many-documents" and not any(f is k for _, k in kept)
    ]


def unread_syntax(docs: list[Document], found: list[Unplaced], kind: Kind) -> list[Unplaced]:
    """A syntax error after a first document that parsed: in a later document, which upstream
    never reads (Go's reader stops after the first), so it is a warning saying so."""
    if not docs:
        return found
    kept: list[Unplaced] = []
    for doc, f in found:
        if doc is None and f.code == "yaml.syntax":
            problem = findings.warning(
                f.path,  # a ConfigMap value's, for one
                "document.ignored",
                f"a later YAML document in this {kind.title} file is not valid YAML "
                f"({f.message.removeprefix('invalid YAML: ')}); upstream reads only the first "
                "document of the file, so this one never matters to it",
                "remove the later documents, or put each config in its own file",
            )
            f = problem.located(f.file or "", f.line, f.column)
        kept.append((doc, f))
    return kept


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
