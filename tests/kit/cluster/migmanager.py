"""The GPU Operator's MIG manager stand-in: `nvidia.com/mig.config` in, a MIG layout out.

Owns what NVIDIA's k8s-mig-manager does on a node where its pod runs (docs/upstream-facts.md M3.2,
docs/upstream-facts.md M3.3): it acts on a *change* of the node's `nvidia.com/mig.config` (the same
name again does nothing until the label goes through another value, mig-parted#108), reads the named
config from the operator's mig-parted ConfigMap (`spec.migManager.config.name`, default
`default-mig-parted-config`, key `config.yaml`), sets `nvidia.com/mig.config.state=pending`,
applies the config to the node's NVML stand-in GPU by GPU (mode, then one GPU and compute
instance per MIG device), restarts the device plugin so the node's capacity follows, and ends
with `success`, or `failed` when the name is missing or a GPU refuses. A node without the MIG
manager's pod (`app=nvidia-mig-manager`, the operator's DaemonSet) is left alone. Must not
render the DaemonSet (operator.py does) nor pause operands by label (it restarts the plugin pod
directly: a pause and resume inside one pass would never be seen by the DaemonSet controller).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import yaml

from tests.kit.kube import ApiError
from tests.kit.node.nodes import SimNode
from tests.kit.plane.loop import Change
from tests.kit.plane.store import ApiStore

Obj = dict[str, Any]
CONFIG_LABEL, STATE_LABEL = "nvidia.com/mig.config", "nvidia.com/mig.config.state"
APP = "nvidia-mig-manager"
DEFAULT_CONFIGMAP, CONFIG_KEY = "default-mig-parted-config", "config.yaml"
PLUGIN_SELECTOR = "app=nvidia-device-plugin-daemonset"


class MigManager:
    """One MIG manager per node whose pod runs there, as its DaemonSet places them."""

    name = "mig-manager"

    def __init__(self, store: ApiStore, nodes: Mapping[str, SimNode], namespace: str) -> None:
        self.store, self.nodes, self.namespace = store, nodes, namespace
        self._applied: dict[str, str] = {}  # node -> the label value last acted on

    def keys_for(self, change: Change) -> Iterable[Hashable]:
        if change.resource == "nodes" and change.type != "DELETED":
            return [("node", change.name)]
        if change.resource == "pods" and change.namespace == self.namespace:
            node = (change.obj.get("spec") or {}).get("nodeName")
            labels = (change.obj.get("metadata") or {}).get("labels") or {}
            return [("node", node)] if node and labels.get("app") == APP else []
        return []

    def reconcile(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        node = str(key[1])
        try:
            labels = self.store.get("nodes", node)["metadata"].get("labels") or {}
        except ApiError:
            return
        wanted = labels.get(CONFIG_LABEL, "")
        if not wanted:
            self._applied.pop(node, None)  # "" or no label: the next name is a change again
            return
        if self._applied.get(node) == wanted or not self._pod_runs(node):
            return
        self._applied[node] = wanted
        self._state(node, "pending")
        self._state(node, self._apply(node, wanted))

    def _pod_runs(self, node: str) -> bool:
        pods = self.store.list(
            "pods",
            self.namespace,
            label_selector=f"app={APP}",
            field_selector=f"spec.nodeName={node}",
        )
        return any((p.get("status") or {}).get("phase") == "Running" for p in pods)

    def _apply(self, node: str, name: str) -> str:
        specs = self._config(name)
        sim = self.nodes.get(node)
        if specs is None or sim is None:
            return "failed"
        try:
            for spec in specs:
                for index in _devices(spec, len(sim.gpus)):
                    sim.set_mig(index, _profiles(spec) if spec.get("mig-enabled") else None)
        except (ValueError, KeyError, TypeError):
            return "failed"
        for pod in self.store.list(
            "pods", self.namespace, label_selector=PLUGIN_SELECTOR,
            field_selector=f"spec.nodeName={node}",
        ):  # fmt: skip
            self.store.delete("pods", pod["metadata"]["name"], self.namespace)
        return "success"

    def _config(self, name: str) -> list[Obj] | None:
        """The named config's specs from the operator's mig-parted ConfigMap (None: absent)."""
        try:
            policies = self.store.list("clusterpolicies.nvidia.com")
        except KeyError:
            policies = []
        section = ((policies[0].get("spec") or {}).get("migManager") or {}) if policies else {}
        configmap = str((section.get("config") or {}).get("name") or DEFAULT_CONFIGMAP)
        try:
            data = self.store.get("configmaps", configmap, self.namespace).get("data") or {}
            doc = yaml.safe_load(data.get(CONFIG_KEY, "")) or {}
        except (ApiError, yaml.YAMLError):
            return None
        found = (doc.get("mig-configs") or {}).get(name) if isinstance(doc, dict) else None
        return list(found) if isinstance(found, list) else None

    def _state(self, node: str, state: str) -> None:
        self.store.patch("nodes", node, {"metadata": {"labels": {STATE_LABEL: state}}})


def _devices(spec: Obj, count: int) -> list[int]:
    devices = spec.get("devices", "all")
    return list(range(count)) if devices == "all" else [int(d) for d in devices]


def _profiles(spec: Obj) -> list[str]:
    """One entry per MIG device, the largest first (NVML's unplaced create fills in order)."""
    counts = spec.get("mig-devices") or {}
    profiles = [str(p) for p, n in counts.items() for _ in range(int(n))]
    return sorted(profiles, key=lambda p: -int(p.split(".")[-2].removesuffix("g")))
