"""`kubectl gpu status`: is every part of the install there, Ready on every GPU node, current.

Owns gathering and judging: the options the namespace was installed with (its annotation),
each object present, each DaemonSet's pods Ready on every GPU node and running the expected
images, the install's version against this CLI's, and the GPU nodes without a GPUNodeReport.
Must not change anything.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

from kubectl_gpu import __version__, bundle, cluster, keys
from kubectl_gpu.errors import ClusterError
from kubectl_gpu.gpumap import report
from kubectl_gpu.workflows.install import facts, objects

Json = dict[str, Any]
State = Literal["ok", "missing", "not ready", "outdated"]


@dataclasses.dataclass(frozen=True)
class Part:
    """One object of the install and how it is."""

    kind: str
    namespace: str
    name: str
    state: State
    detail: str = ""


@dataclasses.dataclass(frozen=True)
class Status:
    mode: str
    namespace: str
    installed_version: str  # "" when not installed
    parts: tuple[Part, ...]
    gpu_nodes: tuple[str, ...]  # the nodes our DaemonSets select
    nodes_without_report: tuple[str, ...]
    nodes_without_gpus: tuple[tuple[str, str], ...] = ()  # (node, why its agent sees none)
    gpu_nodes_not_selected: tuple[str, ...] = ()  # advertise GPUs, lack the labels we select

    @property
    def healthy(self) -> bool:
        placed = bool(self.gpu_nodes) and not self.gpu_nodes_not_selected
        return (
            placed
            and all(p.state == "ok" for p in self.parts)
            and not self.nodes_without_report
            and not self.nodes_without_gpus
        )

    def to_dict(self) -> Json:
        return {
            "mode": self.mode,
            "namespace": self.namespace,
            "installedVersion": self.installed_version,
            "cliVersion": __version__,
            "healthy": self.healthy,
            "parts": [dataclasses.asdict(p) for p in self.parts],
            "gpuNodes": list(self.gpu_nodes),
            "nodesWithoutReport": list(self.nodes_without_report),
            "nodesWithoutGpus": [
                {"node": node, "reason": reason} for node, reason in self.nodes_without_gpus
            ],
            "gpuNodesNotSelected": list(self.gpu_nodes_not_selected),
        }


def status(api: cluster.Api, namespace: str) -> Status:
    """The install in `namespace`, judged part by part."""
    live_namespace = objects.read(api, {"kind": "Namespace", "metadata": {"name": namespace}})
    found = bundle.recorded(live_namespace)
    version, options = found if found else ("", _would_install(api, namespace))
    nodes = list(api.list(cluster.path("nodes")))
    gpu_nodes = tuple(sorted(_name(n) for n in nodes if bundle.is_gpu_node(n)))
    unselected = tuple(sorted(_name(n) for n in nodes
                              if bundle.has_gpus(n) and not bundle.is_gpu_node(n)))  # fmt: skip
    # the GPU Operator's convention, which NVIDIA's DRA docs ask for on DRA nodes: no device
    # plugin there, and the bundle's DaemonSet honours it (bundle._PLUGIN_OFF)
    plugin_off = frozenset(
        _name(n) for n in nodes if _labels(n).get(keys.DEPLOY_DEVICE_PLUGIN_LABEL) == "false"
    )
    parts = tuple(
        _part(api, obj, version, _expected(obj, gpu_nodes, plugin_off))
        for obj in bundle.render(options)
    )
    reported = _reports(api)
    return Status(
        options.mode,
        namespace,
        version,
        parts,
        gpu_nodes,
        tuple(n for n in gpu_nodes if n not in reported),
        tuple(sorted((n, why) for n, why in reported.items() if why and n in gpu_nodes)),
        unselected,
    )


def _would_install(api: cluster.Api, namespace: str) -> bundle.Options:
    """Not installed: the options `kubectl gpu install` would choose here (operator mode
    beside the GPU Operator), so that the parts listed are the ones it would add."""
    from kubectl_gpu import preflight

    request = preflight.Request(bundle.Options(namespace=namespace))
    return preflight.decide(request, facts.facts(api, namespace)).options


def _name(node: Json) -> str:
    return str(node["metadata"]["name"])


def _labels(node: Json) -> dict[str, str]:
    return dict((node.get("metadata") or {}).get("labels") or {})


def _expected(obj: Json, gpu_nodes: tuple[str, ...], plugin_off: frozenset[str]) -> tuple[str, ...]:
    """The GPU nodes where `obj` (a DaemonSet) should run: the device plugin's are those not
    labelled off it; everything else's, every GPU node."""
    if bundle.identity(obj)[2] != bundle.DEVICE_PLUGIN:
        return gpu_nodes
    return tuple(n for n in gpu_nodes if n not in plugin_off)


def _part(api: cluster.Api, obj: Json, version: str, gpu_nodes: tuple[str, ...]) -> Part:
    kind, namespace, name = bundle.identity(obj)
    live = objects.read(api, obj)
    if live is None:
        return Part(kind, namespace, name, "missing", "not found")
    if version and version != __version__ and _carries_version(obj):
        return Part(kind, namespace, name, "outdated", f"installed by kubectl-gpu {version}")
    if kind == "DaemonSet":
        return _daemonset(api, obj, live, gpu_nodes)
    if not objects.owned_fields_match(live, obj):
        return Part(kind, namespace, name, "outdated", "differs from the manifest")
    return Part(kind, namespace, name, "ok")


def _carries_version(obj: Json) -> bool:
    return bundle.VERSION_LABEL in ((obj.get("metadata") or {}).get("labels") or {})


def _daemonset(api: cluster.Api, obj: Json, live: Json, gpu_nodes: tuple[str, ...]) -> Part:
    kind, namespace, name = bundle.identity(obj)
    wrong = _wrong_images(obj, live)
    if wrong:
        return Part(kind, namespace, name, "outdated", wrong)
    ready = _ready_nodes(api, live)
    lacking = [n for n in gpu_nodes if n not in ready]
    if lacking:
        detail = f"not Ready on {len(lacking)}/{len(gpu_nodes)} GPU nodes: {', '.join(lacking)}"
        return Part(kind, namespace, name, "not ready", detail)
    return Part(
        kind, namespace, name, "ok", f"Ready on {len(gpu_nodes)}/{len(gpu_nodes)} GPU nodes"
    )


def _images(daemonset: Mapping[str, Any]) -> dict[str, str]:
    spec = ((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {}
    both = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    return {str(c.get("name")): str(c.get("image")) for c in both}


def _wrong_images(desired: Json, live: Json) -> str:
    running, wanted = _images(live), _images(desired)
    wrong = [f"{n} runs {running.get(n, 'nothing')}, expected {i}" for n, i in wanted.items()
             if running.get(n) != i]  # fmt: skip
    return "; ".join(wrong)


def _ready_nodes(api: cluster.Api, daemonset: Json) -> set[str]:
    """Nodes where a current pod of the DaemonSet is Ready."""
    meta = daemonset["metadata"]
    labels = ((daemonset.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    url = cluster.path("pods", namespace=str(meta["namespace"]))
    ready = set()
    for pod in api.list(url, label_selector=selector):
        conditions = (pod.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            ready.add(str((pod.get("spec") or {}).get("nodeName", "")))
    return ready


def _reports(api: cluster.Api) -> dict[str, str]:
    """Nodes with a report → "" or why their agent could not read the GPUs."""
    try:
        listed = list(api.list(cluster.path("gpunodereports")))
    except ClusterError as e:
        if e.status == 404:  # the CRD is not installed: no node has a report
            return {}
        raise
    return {str(r["metadata"]["name"]): _unreadable(r) for r in listed}


def _unreadable(obj: Json) -> str:
    for finding in (obj.get("status") or {}).get("findings") or []:
        if isinstance(finding, dict) and finding.get("code") == report.NVML_UNREADABLE:
            return str(finding.get("message", ""))
    return ""
