"""Validating a config file: which kind of document it is, and every finding about it.

Owns the order of checks for one input: YAML, then each document by its kind (device-plugin
config, mig-parted config and its companion files, ConfigMaps holding either, Helm values,
DRA claims, templates and DeviceClasses, alone or in a kubectl List): structure (schema),
then the domain's semantic rules. Data flows one way: read, check on plain data (findings
with JSON paths), then place every finding in the file (line, column) once, at the end.
Must not render anything or read files: it takes text.

This module is the public face, and the one gate for a config the product acts on (`check`,
`accept_mig_config`: the text read once, checked as `validate` checks it, and handed back as
plain or typed data, or refused in one wording, `ConfigRejected`); the nouns live beside it:
`kinds` (detection and the table of kinds), `configs` (one config document), `holders`
(ConfigMaps, Helm values, Lists, and opening a ConfigMap that holds a config), `reports`
(what is said about an input).
"""

from __future__ import annotations

import dataclasses

from kubectl_gpu import documents, findings
from kubectl_gpu.documents import Document, Unplaced
from kubectl_gpu.findings import Finding
from kubectl_gpu.mig.spec import MigConfigFile
from kubectl_gpu.validation import holders
from kubectl_gpu.validation.configs import (
    before,
    ignored_document,
    unread_syntax,
    unrecognised,
    validate_as,
)
from kubectl_gpu.validation.holders import HeldFile, held_files
from kubectl_gpu.validation.kinds import (
    AUTO,
    CONFIGMAP,
    DRA,
    HELM_VALUES,
    KINDS,
    LIST,
    Kind,
    detect,
    file_kind,
    with_dra,
)
from kubectl_gpu.validation.reports import (
    AcceptedMigConfig,
    Checked,
    ConfigRejected,
    DocumentReport,
    FileReport,
)

MIG_CONFIG = "mig-config"

__all__ = [
    "AUTO",
    "CONFIGMAP",
    "MIG_CONFIG",
    "AcceptedMigConfig",
    "Checked",
    "ConfigRejected",
    "DRA",
    "HELM_VALUES",
    "KINDS",
    "LIST",
    "DocumentReport",
    "FileReport",
    "HeldFile",
    "Kind",
    "detect",
    "accept_mig_config",
    "check",
    "held_files",
    "unreadable",
    "validate_text",
]


def validate_text(text: str, file: str, kind: str = AUTO) -> FileReport:
    """Validate every YAML document in `text`, read from `file` (a name for messages only)."""
    return check(text, file, kind).report


def check(text: str, file: str, kind: str = AUTO) -> Checked:
    """The one gate for a config the product acts on: `text` read once and checked exactly as
    `kubectl gpu validate` checks it, with its plain data; `Checked.accepted()` gives the data
    or raises the one-wording `ConfigRejected`."""
    docs, found = documents.read(text, file)
    data = docs[0].data if docs else None
    readable = (
        len(docs) <= 1
        and not any(f.severity is findings.Severity.ERROR for _, f in found)
        and (data is None or isinstance(data, dict))
    )
    kinds = with_dra(docs)
    first_kind = file_kind(docs, kind)
    beside = any(detect(d.data) in (CONFIGMAP, LIST, DRA) for d in docs)
    reports: list[DocumentReport] = []
    for index, doc in enumerate(docs):
        first = KINDS.get(reports[0].kind) if reports else None  # a config file upstream reads
        if first is not None:
            # NVIDIA's tools read only the first document: nothing in the others matters to
            # them, so the only finding there is that they are ignored.
            reports.append(DocumentReport(index, detect(doc.data)))
            if index == 1:
                found = before(docs, found)
                found.append(ignored_document(doc, first))
            continue
        if beside and holders.is_other_object(doc.data):
            # a manifest stream (kubectl apply -f): the other objects are not configs
            reports.append(DocumentReport(index, "unknown"))
            found.append((doc, holders.skipped(doc.data)))
            continue
        chosen = first_kind if index == 0 else kind
        report, doc_findings = _validate_document(doc, index, chosen, kinds)
        reports.append(report)
        found.extend(doc_findings)
    if reports and reports[0].kind in KINDS:
        found = unread_syntax(docs, found, KINDS[reports[0].kind])
    placed = _without_echoes(documents.place_all(found))
    ordered = sorted(placed, key=lambda f: (f.line or 0, f.column or 0, f.pointer))
    whole = FileReport(file, tuple(reports), tuple(ordered))
    return Checked(data if readable else None, readable, whole)


def accept_mig_config(text: str, file: str, *, in_configmap: bool = False) -> AcceptedMigConfig:
    """A mig-parted config as the agent and `mig apply` act on it: checked as `kubectl gpu
    validate --kind mig-config` checks it, then built once; `ConfigRejected` otherwise. With
    `in_configmap`, a stream holding ConfigMaps (the GPU Operator's custom MIG config, alone,
    beside other objects or in a `kubectl get cm -o yaml` List) is checked as `validate -f`
    checks it, and the config it holds is taken (`holders.held_mig_config`)."""
    if in_configmap:
        docs, _ = documents.load_documents(text, file)
        if any(detect(d.data) in (CONFIGMAP, LIST) for d in docs):
            whole = check(text, file, AUTO)  # the stream as `validate -f` checks it
            if whole.rejection is not None:
                raise whole.rejection
            inner, file = holders.held_mig_config(file, held_files(docs))
            return _accepted_mig_config(check(inner, file, MIG_CONFIG), file)
    return _accepted_mig_config(check(text, file, MIG_CONFIG), file)


def _accepted_mig_config(checked: Checked, file: str) -> AcceptedMigConfig:
    data = checked.accepted()
    return AcceptedMigConfig(file, data, MigConfigFile.from_dict(data))


def _without_echoes(found: list[Finding]) -> list[Finding]:
    """One finding per value where the YAML loader and the schema both speak about it.

    A value the loader rejected (kept as text) needs no "expected an integer, found the
    string"; a hex number where a string belongs (an unquoted device-filter) needs no note
    on its base; a number a tag made a string (`! 4`) is the error, said as such, where a
    field wants the number.
    """
    spot = _spot
    rejected = {spot(f) for f in found if f.code in documents.VALUE_CODES}
    mistyped = {spot(f) for f in found if f.code == "schema.wrong-type"}
    if not rejected and not mistyped:
        return found
    tagged = {spot(f) for f in found if f.code == documents.TAGGED_STRING} & mistyped
    return [
        _as_error(f) if f.code == documents.TAGGED_STRING and spot(f) in tagged else f
        for f in found
        if not (f.code == "schema.wrong-type" and spot(f) in rejected | tagged)
        and not (f.code == documents.NON_DECIMAL and spot(f) in mistyped)
    ]


def _as_error(f: Finding) -> Finding:
    return dataclasses.replace(f, severity=findings.Severity.ERROR)


def _spot(f: Finding) -> tuple[int | None, int | None, str]:
    return (f.line, f.column, f.pointer)


def unreadable(file: str, problem: str) -> FileReport:
    """The report for an input that could not be read at all."""
    finding = findings.error(
        (), "input.unreadable", problem, "check the path and that the file is UTF-8 YAML or JSON"
    )
    return FileReport(file, (), (finding.located(file, None, None),))


def _validate_document(
    doc: Document, index: int, kind: str, kinds: dict[str, Kind]
) -> tuple[DocumentReport, list[Unplaced]]:
    detected = detect(doc.data)
    chosen = detected if kind == AUTO or detected == LIST else kind
    if chosen == CONFIGMAP:
        return holders.validate_configmap(doc, index)
    if chosen == LIST:
        return holders.validate_list(doc, index, kinds)
    if chosen in HELM_VALUES and isinstance(doc.data, dict):
        return holders.validate_helm_values(doc, index, chosen)
    if chosen not in kinds:
        return DocumentReport(index, "unknown"), [(doc, unrecognised(doc.data))]
    return DocumentReport(index, chosen), validate_as(doc, kinds[chosen])
