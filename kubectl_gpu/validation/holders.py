"""Documents that hold other documents: ConfigMaps, Helm values files and kubectl Lists.

Owns finding the configs such a document embeds (YAML strings under `data`, base64 under a
ConfigMap's `binaryData`, or under the chart's values; objects under `items`, ConfigMaps
included, as `kubectl get cm -o yaml` prints them), checking each as its own kind, and the
rules about the holder itself: a ConfigMap key a node label can select, the chart's default
config and its two config sources. Findings come back unplaced, each with the document that
places it.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from kubectl_gpu import documents, findings, keys, schema
from kubectl_gpu.documents import Document, Unplaced
from kubectl_gpu.errors import ConfigError
from kubectl_gpu.findings import Finding, Path
from kubectl_gpu.validation.configs import (
    about,
    before,
    ignored_document,
    unread_syntax,
    unrecognised,
    validate_as,
)
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
)
from kubectl_gpu.validation.reports import DocumentReport

# A ConfigMap key is selected by the node label nvidia.com/device-plugin.config=<key>,
# so it must be a valid label value (docs/upstream-facts.md P8).
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def validate_list(
    doc: Document, index: int, kinds: dict[str, Kind]
) -> tuple[DocumentReport, list[Unplaced]]:
    """A kubectl List (`kubectl get resourceclaims -o yaml`, `kubectl get cm -o yaml`): each
    item on its own; an object of another kind beside them is skipped with a note."""
    found: list[Unplaced] = []
    keys: list[tuple[str, str]] = []
    items = doc.data["items"]
    known = [detect(item) in (DRA, CONFIGMAP) for item in items]
    for position, item in enumerate(items):
        item_kind = detect(item)
        at = ("items", position)
        if item_kind == CONFIGMAP:
            item_found, item_keys = _configmap(doc, at)
            keys.append((str(position), CONFIGMAP))
            keys.extend((f"{position}/{key}", kind) for key, kind in item_keys)
            found += item_found
            continue
        keys.append((str(position), item_kind if item_kind == DRA else "unknown"))
        if item_kind == DRA:
            problems = kinds[DRA].check(item)
        elif any(known) and is_other_object(item):
            problems = [skipped(item)]
        else:
            problems = [unrecognised(item)]
        found += about(doc, [f.under(at) for f in problems])
    return DocumentReport(index, LIST, tuple(keys)), found


def is_other_object(data: Any) -> bool:
    """A Kubernetes object of a kind `validate` does not check (a Deployment, a Secret)."""
    return (
        isinstance(data, dict)
        and isinstance(data.get("kind"), str)
        and "apiVersion" in data
        and detect(data) == "unknown"
    )


def skipped(data: dict[str, Any]) -> Finding:
    """The note on an object beside the configs of a file, which `validate` does not check."""
    metadata = data.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    what = f"{data.get('kind')}" + (f" {name}" if name else "")
    return findings.warning(
        (),
        "document.skipped",
        f"skipped the {what}: not a config kubectl gpu validates (the configs beside it are "
        "checked)",
        "nothing to do; validate only the ConfigMaps with -f on a file holding them alone",
    )


@dataclasses.dataclass(frozen=True)
class HeldFile:
    """A file a ConfigMap of the input holds, as a node that mounts it sees it."""

    configmap: str  # its metadata.name, or "" where it has none
    key: str
    text: str


def held_files(docs: list[Document]) -> list[HeldFile]:
    """Every file the ConfigMaps of a stream hold, in file order: each document that is a
    ConfigMap and each ConfigMap item of a List (`kubectl get cm -o yaml`), `data` values
    then `binaryData` values decoded (one that does not decode is left out: `validate`
    reports it)."""
    held: list[HeldFile] = []
    for doc in docs:
        kind = detect(doc.data)
        if kind == CONFIGMAP:
            holders = [doc.data]
        elif kind == LIST:
            holders = [item for item in doc.data["items"] if detect(item) == CONFIGMAP]
        else:
            continue
        for cm in holders:
            metadata = cm.get("metadata")
            name = str(metadata.get("name") or "") if isinstance(metadata, dict) else ""
            data, binary = cm.get("data"), cm.get("binaryData")
            for key, value in data.items() if isinstance(data, dict) else ():
                if isinstance(value, str):
                    held.append(HeldFile(name, str(key), value))
            for key, value in binary.items() if isinstance(binary, dict) else ():
                text, problem = _binary_text((), value)
                if problem is None:
                    held.append(HeldFile(name, str(key), text))
    return held


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
    found, keys = _configmap(doc, ())
    return DocumentReport(index, CONFIGMAP, tuple(keys)), found


def _configmap(doc: Document, at: Path) -> tuple[list[Unplaced], list[tuple[str, str]]]:
    """The ConfigMap at `at` in `doc`: its structure, each `data` value and each `binaryData`
    value (base64 of the file the node mounts) as the config it holds."""
    cm = doc.data
    for part in at:  # ("items", 3) in a List
        cm = cm[part]
    structure = schema.check_structure(cm, "configmap.v1")
    if isinstance(cm.get("binaryData"), dict) and "data" not in cm:  # data is optional then
        structure = [
            f for f in structure if not (f.code == "schema.missing-field" and "data" in f.message)
        ]
    found = about(doc, [f.under(at) for f in structure])
    keys: list[tuple[str, str]] = []
    data = cm.get("data")
    for key, value in data.items() if isinstance(data, dict) else ():
        if not isinstance(value, str):
            continue  # the structure check reported it
        value_kind, value_findings = _validate_value(doc, (*at, "data", key), value)
        keys.append((key, value_kind))
        found.extend(value_findings)
    binary = cm.get("binaryData")
    for key, value in binary.items() if isinstance(binary, dict) else ():
        path = (*at, "binaryData", key)
        text, problem = _binary_text(path, value)
        if problem is not None:
            found.extend(about(doc, [problem]))
            continue
        value_kind, value_findings = _validate_value(doc, path, text, encoded=True)
        keys.append((key, value_kind))
        found.extend(value_findings)
    return found, keys


def _binary_text(path: Path, value: Any) -> tuple[str, Finding | None]:
    """The text of a `binaryData` value: base64 (Kubernetes refuses anything else), then the
    bytes decoded as NVIDIA's YAML reader decodes a file (UTF-8, or UTF-16 after its BOM)."""
    import base64
    import binascii

    from kubectl_gpu.documents import decode

    raw = None
    if isinstance(value, str):
        try:
            raw = base64.b64decode(value.replace("\n", "").replace("\r", ""), validate=True)
        except (binascii.Error, ValueError):
            raw = None
    if raw is None:
        return "", findings.error(
            path,
            "configmap.bad-binary-data",
            "a binaryData value must be base64 text: Kubernetes refuses the ConfigMap",
            "encode the file with base64 -w0, or move the config under data as text",
        )
    try:
        return decode(raw), None
    except UnicodeDecodeError as e:
        return "", findings.error(
            path,
            "configmap.bad-binary-data",
            f"the file this binaryData value holds is not text (byte {e.start}): the device "
            "plugin and mig-parted read UTF-8, or UTF-16 after a byte-order mark",
            "store the config as UTF-8 text, under data",
        )


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


def _validate_value(
    doc: Document, path: Path, text: str, *, encoded: bool = False
) -> tuple[str, list[Unplaced]]:
    """The config in the string at `path`: read as a config file is, the first document only.
    Its findings are placed by the nested documents, which know where the string is (an
    `encoded` value, base64, only by the key's line)."""
    inner_docs, found = documents.read_nested(doc, path, text, exact=not encoded, first_only=True)
    value_kind = file_kind(inner_docs, AUTO)
    for index, inner in enumerate(inner_docs):
        inner_kind = value_kind if index == 0 else detect(inner.data)
        if index == 1 and inner_kind in KINDS:  # read as a config file is: the first only
            found = before(inner_docs, found)
            found.append(ignored_document(inner, KINDS[inner_kind]))
        if index > 0:
            continue
        if inner_kind in KINDS:
            found.extend(validate_as(inner, KINDS[inner_kind]))
        else:
            found.append((inner, unrecognised(inner.data)))
    if value_kind in KINDS:
        found = unread_syntax(inner_docs, found, KINDS[value_kind])
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


def held_mig_config(name: str, held: list[HeldFile]) -> tuple[str, str]:
    """(text, where) of the one mig-parted config the input's ConfigMaps hold (`held_files`):
    the key `config.yaml` (what the GPU Operator's MIG manager reads), else the only held file
    that is a mig-parted config. ConfigError naming the keys where that is none, or more than
    one and none of them `config.yaml`, or `config.yaml` in several ConfigMaps."""
    wanted = keys.MIG_PARTED_CONFIG_KEY
    configs = [f for f in held if _looks_like_mig_config(f, name)]
    chosen = [f for f in configs if f.key == wanted] or configs
    if len(chosen) == 1:
        return chosen[0].text, f"{name}:{chosen[0].key}"
    maps = {f.configmap for f in held}
    if chosen and chosen[0].key == wanted:  # the key in several ConfigMaps
        raise ConfigError(
            f"{name}: {len(chosen)} ConfigMaps hold {wanted} "
            f"({', '.join(f.configmap or '?' for f in chosen)})",
            hint="give a file holding only the ConfigMap to apply: kubectl get cm NAME -o yaml",
        )
    shown = [f.key if len(maps) == 1 else f"{f.configmap or '?'}/{f.key}" for f in held]
    where = "the ConfigMap has" if len(maps) <= 1 else f"the {len(maps)} ConfigMaps have"
    raise ConfigError(
        f"{name}: {where} no key {wanted} (keys: {', '.join(shown) or 'none'})",
        hint=f"the GPU Operator's MIG manager reads {wanted}: put the mig-parted config there",
    )


def _looks_like_mig_config(file: HeldFile, name: str) -> bool:
    inner, _ = documents.load_documents(file.text, f"{name}:{file.key}")
    data = inner[0].data if inner else None
    return isinstance(data, dict) and "mig-configs" in data


def configmap_text(configmap: dict[str, Any], file: str, preferred: str) -> tuple[str, str]:
    """(text, where) of the config a ConfigMap holds, as a pod that mounts it reads the file:
    key `preferred` (the GPU Operator's MIG manager reads `config.yaml`), or the only key;
    under `data` as text, or under `binaryData` as base64 of the file. ConfigError when no
    key can be chosen or a binaryData value is not a text file."""
    data: dict[str, Any] = configmap.get("data") or {}
    binary: dict[str, Any] = configmap.get("binaryData") or {}  # a valid ConfigMap: mappings
    held = [*data, *binary]
    key = preferred if preferred in held else (held[0] if len(held) == 1 else None)
    if key is None:
        raise ConfigError(
            f"{file}: the ConfigMap has no key {preferred} (keys: {', '.join(held) or 'none'})",
            hint=f"the GPU Operator's MIG manager reads {preferred}: put the config there",
        )
    where = f"{file}:{key}"
    if key in data:
        return str(data[key]), where
    text, problem = _binary_text(("binaryData", key), binary[key])
    if problem is not None:
        raise ConfigError(f"{where}: {problem.message}", hint=problem.hint)
    return text, where
