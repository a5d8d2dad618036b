"""Documents that hold other documents: ConfigMaps, Helm values files and kubectl Lists.

Owns finding the configs such a document embeds (YAML strings under `data`, or under the
chart's values; objects under `items`), checking each as its own kind, and the rules about
the holder itself: a ConfigMap key a node label can select, the chart's default config and
its two config sources. Findings come back unplaced, each with the document that places it.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from kubectl_gpu import documents, findings, schema
from kubectl_gpu.documents import Document, Unplaced
from kubectl_gpu.findings import Finding, Path
from kubectl_gpu.validation.configs import (
    about,
    before,
    ignored_document,
    unrecognised,
    validate_as,
)
from kubectl_gpu.validation.kinds import CONFIGMAP, DRA, HELM_VALUES, KINDS, LIST, Kind, detect
from kubectl_gpu.validation.reports import DocumentReport

# A ConfigMap key is selected by the node label nvidia.com/device-plugin.config=<key>,
# so it must be a valid label value (reference/sharing-config.md §8).
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def validate_list(
    doc: Document, index: int, kinds: dict[str, Kind]
) -> tuple[DocumentReport, list[Unplaced]]:
    """A kubectl List (`kubectl get resourceclaims -o yaml`): each item on its own."""
    found: list[Unplaced] = []
    keys: list[tuple[str, str]] = []
    for position, item in enumerate(doc.data["items"]):
        item_kind = detect(item)
        keys.append((str(position), item_kind if item_kind == DRA else "unknown"))
        problems = kinds[DRA].check(item) if item_kind == DRA else [unrecognised(item)]
        found += about(doc, [f.under(("items", position)) for f in problems])
    return DocumentReport(index, LIST, tuple(keys)), found


def validate_configmap(doc: Document, index: int) -> tuple[DocumentReport, list[Unplaced]]:
    """A ConfigMap: its own structure, then each data value as the config it holds."""
    if not isinstance(doc.data, dict):
        what = "empty" if doc.data is None else f"a {type(doc.data).__name__}, not a mapping"
        problem = findings.error(
            (),
            "configmap.not-a-mapping",
            f"--kind configmap: the document is {what}",
            "give a ConfigMap (apiVersion: v1, kind: ConfigMap, data: {...}), e.g. from "
            "kubectl get configmap NAME -o yaml",
        )
        return DocumentReport(index, CONFIGMAP), [(doc, problem)]
    found = about(doc, schema.check_structure(doc.data, "configmap.v1"))
    data = doc.data.get("data")
    if not isinstance(data, dict):
        return DocumentReport(index, CONFIGMAP), found
    keys: list[tuple[str, str]] = []
    for key, value in data.items():
        if not isinstance(value, str):
            continue  # the structure check reported it
        value_kind, value_findings = _validate_value(doc, ("data", key), value)
        keys.append((key, value_kind))
        found.extend(value_findings)
    return DocumentReport(index, CONFIGMAP, tuple(keys)), found


def validate_helm_values(
    doc: Document, index: int, kind: str
) -> tuple[DocumentReport, list[Unplaced]]:
    """The chart's own values, then each embedded config, located in the values file."""
    found = about(doc, schema.check_structure(doc.data, f"{kind}.v1"))
    keys: list[tuple[str, str]] = []
    for where in HELM_VALUES[kind]:
        table = _dig(doc.data, where)
        if not isinstance(table, dict):
            continue
        for key, value in table.items():
            if isinstance(value, str):
                value_kind, value_findings = _validate_value(doc, (*where, key), value)
                keys.append((".".join((*where, str(key))), value_kind))
                found.extend(value_findings)
        found.extend(about(doc, _check_default_key(doc.data, where, table)))
    if kind == "device-plugin-chart-values":
        found.extend(about(doc, _check_one_config_source(doc.data)))
    return DocumentReport(index, kind, tuple(keys)), found


def _dig(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _check_default_key(data: Any, where: tuple[str, ...], table: dict[Any, Any]) -> list[Finding]:
    default_path = (*where[:-1], "default")
    default = _dig(data, default_path)
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
    return [problem]


def _check_one_config_source(data: dict[str, Any]) -> list[Finding]:
    config = data.get("config")
    if not (isinstance(config, dict) and config.get("name") and config.get("map")):
        return []
    problem = findings.error(
        ("config", "name"),
        "helm.two-config-sources",
        "config.name and config.map are both set: the chart uses the existing ConfigMap "
        "config.name and ignores config.map",
        "keep config.map (the chart creates the ConfigMap) or config.name (one you manage)",
    )
    return [problem]


def _validate_value(doc: Document, path: Path, text: str) -> tuple[str, list[Unplaced]]:
    """The config in the string at `path`: read as a config file is, the first document only.
    Its findings are placed by the nested documents, which know where the string is."""
    inner_docs, found = documents.read_nested(doc, path, text)
    value_kind = detect(inner_docs[0].data) if inner_docs else "device-plugin-config"
    for index, inner in enumerate(inner_docs):
        inner_kind = detect(inner.data)
        if index == 1 and inner_kind in KINDS:  # read as a config file is: the first only
            found = before(inner_docs, found)
            found.append(ignored_document(inner, KINDS[inner_kind]))
        if index > 0:
            continue
        if inner_kind in KINDS:
            found.extend(validate_as(inner, KINDS[inner_kind]))
        else:
            found.append((inner, unrecognised(inner.data)))
    if value_kind == "device-plugin-config":
        found.extend(about(doc, _check_selectable_key(path)))
    return value_kind, found


def _check_selectable_key(path: Path) -> list[Finding]:
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
    return [dataclasses.replace(problem, at_key=True)]
