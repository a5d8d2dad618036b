"""Which kind of document `validate` is looking at, and the rules each kind is checked by.

Owns kind detection from a document's top-level keys (device-plugin config, mig-parted config
and its companion files, ConfigMaps, Helm values, DRA objects, kubectl Lists) and the table of
kinds: each one's schema, how upstream reads its plain data, and its domain rules, imported
only when a document of that kind is checked. Must not place findings in the file.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

from kubectl_gpu.documents import Document
from kubectl_gpu.findings import Finding

Check = Callable[[Mapping[str, Any]], list[Finding]]
Read = Callable[[Any], tuple[Any, list[Finding]]]


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


def file_kind(docs: list[Document], kind: str) -> str:
    """The kind the first document of a file is read as.

    A config file is read by one tool, which reads only its first document: when that is
    empty (`{}` or nothing) and a later one names the kind (`mig-configs`), the file is that
    kind's, and so is its first document (mig-parted refuses `{}`: it has no version).
    """
    if not docs:
        return kind if kind != AUTO else "device-plugin-config"
    first = detect(docs[0].data)
    if kind != AUTO:
        return first if first == LIST else kind
    if docs[0].data in (None, {}) and len(docs) > 1:
        later = (_named_kind(d.data) for d in docs[1:])
        return next((k for k in later if k), first)
    return first


def _named_kind(data: Any) -> str:
    """The kind a document names by holding its part (`mig-configs: {...}`), or ""."""
    kind = detect(data)
    key = {"mig-config": "mig-configs", "mig-parted-hooks": "hooks"}.get(kind)
    if key is None and kind != "mig-manager-gpu-clients":
        return ""
    return kind if key is None or isinstance(data.get(key), dict) else ""


def with_dra(docs: list[Document]) -> dict[str, Kind]:
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
