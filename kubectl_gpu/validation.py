"""Validating a config file: which kind of document it is, and every finding about it.

Owns kind detection (device-plugin config, mig-parted config and its companion files,
ConfigMaps holding either, DRA claims, templates and DeviceClasses, alone or in a kubectl
List) and the order of checks: YAML, structure (schema), then
the domain's semantic rules. Must not render anything or read files: it takes text.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

from kubectl_gpu import documents, findings, schema
from kubectl_gpu.findings import Finding, Path

Check = Callable[[Mapping[str, Any]], list[Finding]]
Read = Callable[[Any], tuple[Any, list[Finding]]]

# A ConfigMap key is selected by the node label nvidia.com/device-plugin.config=<key>,
# so it must be a valid label value (reference/sharing-config.md §8).
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


@dataclasses.dataclass(frozen=True)
class Kind:
    """A kind of document `validate` understands."""

    name: str
    title: str  # in the user's words, for messages
    schema: str | None  # None: the domain check covers the structure too
    check: Check
    read: Read = lambda data: (data, [])  # how upstream reads the plain data, before any check


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            "device-plugin-config",
            "device-plugin config",
            "device-plugin-config.v1",
            lambda data: _sharing().check(data),
            lambda data: _reading().read(data),
        ),
        Kind(
            "mig-config",
            "mig-parted config",
            "mig-config.v1",
            lambda data: _spec().check(data),
            lambda data: _spec().read(data),
        ),
        Kind(
            "mig-parted-hooks",
            "mig-parted hooks file",
            "mig-parted-hooks.v1",
            lambda data: _companions().check_hooks(data),
        ),
        Kind(
            "mig-manager-gpu-clients",
            "MIG manager GPU clients file",
            "mig-manager-gpu-clients.v1",
            lambda data: _companions().check_gpu_clients(data),
        ),
    )
}
_DRA_GROUP = "resource.k8s.io"  # dra.objects.GROUP, without importing dra to say no


# Each kind's rules are imported when a document of that kind is checked: a device-plugin
# ConfigMap does not pay for the MIG and DRA catalogues (about 10 ms of validate's 250).
def _sharing() -> Any:
    from kubectl_gpu import sharing

    return sharing


def _reading() -> Any:
    from kubectl_gpu.sharing import reading

    return reading


def _spec() -> Any:
    from kubectl_gpu.mig import spec

    return spec


def _companions() -> Any:
    from kubectl_gpu.mig import companions

    return companions


def _dra() -> Any:
    from kubectl_gpu import dra

    return dra


CONFIGMAP = "configmap"
DRA = "dra"
LIST = "list"
AUTO = "auto"
# Helm values files that embed configs as YAML strings: kind -> where the configs are,
# and the key naming the default config among them.
HELM_VALUES: dict[str, tuple[tuple[str, ...], ...]] = {
    "device-plugin-chart-values": (("config", "map"),),
    "gpu-operator-values": (("devicePlugin", "config", "data"), ("migManager", "config", "data")),
}
_OPERATOR_KEYS = ("devicePlugin", "migManager", "operator", "driver", "toolkit", "dcgmExporter")


@dataclasses.dataclass(frozen=True)
class DocumentReport:
    """What one document in a file was taken for."""

    index: int
    kind: str  # a KINDS name, "configmap", "dra", "list" or "unknown"
    # for a ConfigMap: (data key, kind of its value); for a List: (item index, its kind)
    keys: tuple[tuple[str, str], ...] = ()


@dataclasses.dataclass(frozen=True)
class FileReport:
    """Every finding about one input, in file order."""

    file: str
    documents: tuple[DocumentReport, ...]
    findings: tuple[Finding, ...]

    @property
    def valid(self) -> bool:
        """True when no finding is an error (warnings allowed)."""
        return not findings.has_errors(self.findings)


def validate_text(text: str, file: str, kind: str = AUTO) -> FileReport:
    """Validate every YAML document in `text`, read from `file` (a name for messages only)."""
    docs, found = documents.load_documents(text, file)
    kinds = _with_dra(docs)
    reports: list[DocumentReport] = []
    for index, doc in enumerate(docs):
        first = KINDS.get(reports[0].kind) if reports else None  # a config file upstream reads
        if first is not None:
            # NVIDIA's tools read only the first document: nothing in the others matters to
            # them, so the only finding there is that they are ignored.
            reports.append(DocumentReport(index, detect(doc.data)))
            if index == 1:
                found = _before(doc, found)
                found.append(_ignored_document(doc, first))
            continue
        report, doc_findings = _validate_document(doc, index, kind, kinds)
        reports.append(report)
        found.extend(doc_findings)
    found = _without_echoes(found)
    ordered = sorted(found, key=lambda f: (f.line or 0, f.column or 0, f.pointer))
    return FileReport(file, tuple(reports), tuple(ordered))


def _without_echoes(found: list[Finding]) -> list[Finding]:
    """One finding per value where the YAML loader and the schema both speak about it.

    A value the loader rejected (kept as text) needs no "expected an integer, found the
    string"; a hex number where a string belongs (an unquoted device-filter) needs no note
    on its base.
    """
    spot = _spot
    rejected = {spot(f) for f in found if f.code in documents.VALUE_CODES}
    mistyped = {spot(f) for f in found if f.code == "schema.wrong-type"}
    if not rejected and not mistyped:
        return found
    return [
        f
        for f in found
        if not (f.code == "schema.wrong-type" and spot(f) in rejected)
        and not (f.code == documents.NON_DECIMAL and spot(f) in mistyped)
    ]


def _spot(f: Finding) -> tuple[int | None, int | None, str]:
    return (f.line, f.column, f.pointer)


def unreadable(file: str, problem: str) -> FileReport:
    """The report for an input that could not be read at all."""
    finding = findings.error(
        (), "input.unreadable", problem, "check the path and that the file is UTF-8 YAML or JSON"
    )
    return FileReport(file, (), (finding.located(file, None, None),))


def detect(data: Any) -> str:
    """Name the kind of a document from its top-level keys ("unknown" when it is none)."""
    if data is None:
        return "device-plugin-config"  # an empty config is the plugin's default
    if not isinstance(data, dict):
        return "unknown"
    if data.get("kind") == "ConfigMap":
        return CONFIGMAP
    if str(data.get("apiVersion", "")).startswith(_DRA_GROUP + "/") and _dra().is_dra(data):
        return DRA
    if str(data.get("kind", "")).endswith("List") and isinstance(data.get("items"), list):
        return LIST
    if "kind" in data and "apiVersion" in data:
        return "unknown"
    helm = _helm_values_kind(data)
    if helm:
        return helm
    for key, name in (
        ("mig-configs", "mig-config"),
        ("hooks", "mig-parted-hooks"),
        ("systemd-services", "mig-manager-gpu-clients"),
    ):
        if key in data:
            return name
    return "device-plugin-config"


def _with_dra(docs: list[documents.Document]) -> dict[str, Kind]:
    """KINDS plus DRA objects, checked against the DeviceClasses this file defines too."""
    objects = [d.data for d in docs]
    objects += [i for d in docs if detect(d.data) == LIST for i in d.data["items"]]

    @functools.cache
    def classes() -> Any:
        return _dra().catalogue(objects)

    check: Check = lambda data: _dra().check(data, classes())  # noqa: E731
    return {**KINDS, DRA: Kind(DRA, "DRA object", None, check)}


def _helm_values_kind(data: dict[Any, Any]) -> str:
    """A Helm values file of NVIDIA's device-plugin chart or the GPU Operator, or ""."""
    config = data.get("config")
    if isinstance(config, dict) and {"map", "name", "default"} & set(config):
        return "device-plugin-chart-values"
    if any(isinstance(data.get(key), dict) for key in _OPERATOR_KEYS):
        return "gpu-operator-values"
    return ""


def _validate_document(
    doc: documents.Document, index: int, kind: str, kinds: dict[str, Kind]
) -> tuple[DocumentReport, list[Finding]]:
    detected = detect(doc.data)
    chosen = detected if kind == AUTO or detected == LIST else kind
    if chosen == CONFIGMAP:
        return _validate_configmap(doc, index)
    if chosen == LIST:
        return _validate_list(doc, index, kinds)
    if chosen in HELM_VALUES and isinstance(doc.data, dict):
        return _validate_helm_values(doc, index, chosen)
    if chosen not in kinds:
        return DocumentReport(index, "unknown"), [doc.place(_unrecognised(doc.data))]
    return DocumentReport(index, chosen), _validate_as(doc, kinds[chosen])


def _validate_list(
    doc: documents.Document, index: int, kinds: dict[str, Kind]
) -> tuple[DocumentReport, list[Finding]]:
    """A kubectl List (`kubectl get resourceclaims -o yaml`): each item on its own."""
    found: list[Finding] = []
    keys: list[tuple[str, str]] = []
    for position, item in enumerate(doc.data["items"]):
        item_kind = detect(item)
        keys.append((str(position), item_kind if item_kind == DRA else "unknown"))
        problems = kinds[DRA].check(item) if item_kind == DRA else [_unrecognised(item)]
        found += [doc.place(f.under(("items", position))) for f in problems]
    return DocumentReport(index, LIST, tuple(keys)), found


def _validate_as(doc: documents.Document, kind: Kind) -> list[Finding]:
    if doc.data is None:
        return []
    data, found = kind.read(doc.data)
    located = [doc.place(f) for f in found]
    if kind.schema:
        located.extend(schema.check_structure(dataclasses.replace(doc, data=data), kind.schema))
    if isinstance(data, Mapping):
        located.extend(doc.place(f) for f in kind.check(data))
    return located


def _before(doc: documents.Document, found: list[Finding]) -> list[Finding]:
    """The findings located before `doc` starts (the YAML loader's, about later documents,
    go: upstream never parses them), and the one saying the file was not read to its end."""
    start, _ = doc.locate(())
    if start is None or not doc.exact:
        return found
    kept = [f for f in found if f.line is None or f.line < start]
    return kept + [f for f in found if f.code == "yaml.too-many-documents" and f not in kept]


def _ignored_document(doc: documents.Document, kind: Kind) -> Finding:
    """Upstream reads only the first YAML document of a config file; say so about the rest."""
    problem = findings.warning(
        (),
        "document.ignored",
        f"this is a second YAML document in a {kind.title} file: upstream reads only the "
        "first document of the file and ignores this one and any after it",
        "put each config in its own file or ConfigMap key",
    )
    return doc.place(problem)


def _unrecognised(data: Any) -> Finding:
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


def _validate_configmap(
    doc: documents.Document, index: int
) -> tuple[DocumentReport, list[Finding]]:
    if not isinstance(doc.data, dict):
        what = "empty" if doc.data is None else f"a {type(doc.data).__name__}, not a mapping"
        problem = findings.error(
            (),
            "configmap.not-a-mapping",
            f"--kind configmap: the document is {what}",
            "give a ConfigMap (apiVersion: v1, kind: ConfigMap, data: {...}), e.g. from "
            "kubectl get configmap NAME -o yaml",
        )
        return DocumentReport(index, CONFIGMAP), [doc.place(problem)]
    found = schema.check_structure(doc, "configmap.v1")
    data = doc.data.get("data")
    if not isinstance(data, dict):
        return DocumentReport(index, CONFIGMAP), found
    keys: list[tuple[str, str]] = []
    for key, value in data.items():
        if not isinstance(value, str):
            continue  # the structure check reported it
        value_kind, value_findings = _validate_configmap_value(doc, ("data", key), value)
        keys.append((key, value_kind))
        found.extend(value_findings)
    return DocumentReport(index, CONFIGMAP, tuple(keys)), found


def _validate_helm_values(
    doc: documents.Document, index: int, kind: str
) -> tuple[DocumentReport, list[Finding]]:
    """The chart's own values, then each embedded config, located in the values file."""
    found = schema.check_structure(doc, f"{kind}.v1")
    keys: list[tuple[str, str]] = []
    for where in HELM_VALUES[kind]:
        table = _dig(doc.data, where)
        if not isinstance(table, dict):
            continue
        for key, value in table.items():
            if isinstance(value, str):
                value_kind, value_findings = _validate_configmap_value(doc, (*where, key), value)
                keys.append((".".join((*where, str(key))), value_kind))
                found.extend(value_findings)
        found.extend(_check_default_key(doc, where, table))
    if kind == "device-plugin-chart-values":
        found.extend(_check_one_config_source(doc))
    return DocumentReport(index, kind, tuple(keys)), found


def _dig(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _check_default_key(
    doc: documents.Document, where: tuple[str, ...], table: dict[Any, Any]
) -> list[Finding]:
    default_path = (*where[:-1], "default")
    default = _dig(doc.data, default_path)
    if where[0] == "migManager" or not table or not default or default in table:
        return []  # the MIG manager's default names a mig-config, not a data key
    problem = findings.error(
        default_path,
        "helm.default-config-missing",
        f"the default config '{default}' is not a key of {'.'.join(where)}: nodes without "
        "the nvidia.com/device-plugin.config label get no config and the config-manager "
        "fails",
        "use one of: " + ", ".join(str(k) for k in table),
    )
    return [doc.place(problem)]


def _check_one_config_source(doc: documents.Document) -> list[Finding]:
    config = doc.data.get("config")
    if not (isinstance(config, dict) and config.get("name") and config.get("map")):
        return []
    problem = findings.error(
        ("config", "name"),
        "helm.two-config-sources",
        "config.name and config.map are both set: the chart uses the existing ConfigMap "
        "config.name and ignores config.map",
        "keep config.map (the chart creates the ConfigMap) or config.name (one you manage)",
    )
    return [doc.place(problem)]


def _validate_configmap_value(
    doc: documents.Document, path: Path, text: str
) -> tuple[str, list[Finding]]:
    inner_docs, inner_found = documents.load_nested(doc, path, text)
    value_kind = detect(inner_docs[0].data) if inner_docs else "device-plugin-config"
    for index, inner in enumerate(inner_docs):
        inner_kind = detect(inner.data)
        if index == 1 and inner_kind in KINDS:  # read as a config file is: the first only
            inner_found = _before(inner, inner_found)
            inner_found.append(_ignored_document(inner, KINDS[inner_kind]))
        if index > 0:
            continue
        if inner_kind in KINDS:
            inner_found.extend(_validate_as(inner, KINDS[inner_kind]))
        else:
            inner_found.append(inner.place(_unrecognised(inner.data)))
    found = [f.under(path) for f in inner_found]
    if value_kind == "device-plugin-config":
        found.extend(_check_selectable_key(doc, path))
    return value_kind, found


def _check_selectable_key(doc: documents.Document, path: Path) -> list[Finding]:
    key = str(path[-1])
    if len(key) <= 63 and _LABEL_VALUE.match(key) and key:
        return []
    problem = findings.error(
        path,
        "configmap.bad-key",
        f"key '{key}' cannot be selected by the node label "
        f"nvidia.com/device-plugin.config: a label value is at most 63 characters of "
        "letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
        "rename the key, e.g. "
        + (re.sub(r"[^A-Za-z0-9_.-]", "-", key).strip("-._")[:63] or "default"),
    )
    return [doc.place(dataclasses.replace(problem, at_key=True))]
