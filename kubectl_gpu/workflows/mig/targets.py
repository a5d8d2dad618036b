"""The nodes a MIG apply or status is about, each with its GPUs and its MIG actuator.

Owns resolving `--node` / `-l` / `--all` to GPU nodes (a named node that is not a GPU node is
refused; a selector or --all skips such nodes), each node's GPUs for the offline check (the
agent's `kubectl-gpu.io/mig.gpus` report when there is one, else GPU Feature Discovery labels,
as `mig validate --node` reads them) and who acts on it (`mig.actuators`). Must not write
anything, nor decide whether a config fits (mig.verdicts does).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from kubectl_gpu import cluster, keys
from kubectl_gpu.errors import ClusterError, GpuError, UsageError
from kubectl_gpu.mig import actuators, models, nodes
from kubectl_gpu.mig.actuators import Actuator
from kubectl_gpu.mig.nodes import NodeGpu, Target

Json = dict[str, Any]
_GPU_RESOURCE = "nvidia.com/gpu"
MAX_REPORT_CHARS = 64 * 1024  # an annotation is small; a huge one is not the agent's


@dataclasses.dataclass(frozen=True)
class Scope:
    """Which nodes: named ones, a label selector, or every GPU node."""

    names: tuple[str, ...] = ()
    selector: str = ""
    all_nodes: bool = False

    def check(self) -> None:
        """Exactly one way of choosing nodes."""
        given = sum((bool(self.names), bool(self.selector), self.all_nodes))
        if given != 1:
            raise UsageError("choose the nodes with one of --node NAME, -l SELECTOR or --all")


@dataclasses.dataclass(frozen=True)
class NodeFacts:
    """One GPU node as read now: its metadata, its actuator and its GPUs (None: unknown)."""

    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    actuator: Actuator
    target: Target | None
    problem: str = ""  # why its GPUs are unknown


def read(api: cluster.Api, scope: Scope, policies: Sequence[Json]) -> list[NodeFacts]:
    """The GPU nodes in `scope`, in the order named (or by name)."""
    scope.check()
    found = [facts_of(node, policies) for node in _nodes(api, scope)]
    if not found:
        what = f"matching {scope.selector!r}" if scope.selector else "in the cluster"
        raise GpuError(
            f"no GPU nodes {what}", hint="GPU nodes carry nvidia.com/gpu.present=true (GFD)"
        )
    return found


def _nodes(api: cluster.Api, scope: Scope) -> list[Json]:
    if not scope.names:
        listed = api.list(cluster.path("nodes"), label_selector=scope.selector)
        return sorted((n for n in listed if is_gpu_node(n)), key=_name)
    chosen = []
    for name in dict.fromkeys(scope.names):
        node = _get_node(api, name)
        if not is_gpu_node(node):
            raise GpuError(
                f"node {name} is not a GPU node (no {keys.GPU_PRESENT_LABEL}=true, no GPUs "
                "in its capacity)",
                hint="kubectl gpu mig status lists the GPU nodes",
            )
        chosen.append(node)
    return chosen


def _get_node(api: cluster.Api, name: str) -> Json:
    try:
        return api.get(cluster.path("nodes", name))
    except ClusterError as e:
        if e.status == 404:
            raise GpuError(
                f"node {name} not found", hint="kubectl get nodes lists the node names"
            ) from e
        raise


def is_gpu_node(node: Json) -> bool:
    """GFD's present or product label, our agent's GPU report, or NVIDIA GPUs in the node's
    capacity."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    if labels.get(keys.GPU_PRESENT_LABEL) == "true" or labels.get(keys.GPU_PRODUCT_LABEL):
        return True
    if keys.MIG_GPUS_ANNOTATION in (meta.get("annotations") or {}):
        return True
    capacity = (node.get("status") or {}).get("capacity") or {}
    return any(r == _GPU_RESOURCE or r.startswith(keys.MIG_RESOURCE_PREFIX) for r in capacity)


def facts_of(node: Json, policies: Sequence[Json]) -> NodeFacts:
    """One node's facts from its object (only its metadata is read)."""
    meta = node.get("metadata") or {}
    name = _name(node)
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    notes = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    actuator = actuators.choose(policies, labels)
    try:
        target: Target | None = _target(name, labels, notes)
        problem = ""
    except GpuError as e:
        target, problem = None, e.message
    return NodeFacts(name, labels, notes, actuator, target, problem)


def _target(name: str, labels: dict[str, str], notes: dict[str, str]) -> Target:
    """The agent's report of the node's GPUs when it has one, else GFD's labels."""
    report = notes.get(keys.MIG_GPUS_ANNOTATION, "")
    if report:
        return reported_target(name, report)
    return nodes.node_target(name, labels)


def reported_target(node: str, report: str) -> Target:
    """A Target from the agent's `[{"index", "pci", "name"}]` report of a node's GPUs."""
    try:
        if len(report) > MAX_REPORT_CHARS:
            raise ValueError("too long")
        entries = json.loads(report)
        gpus = tuple(sorted((_reported_gpu(e) for e in entries), key=lambda g: g.index))
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise GpuError(f"node {node}'s {keys.MIG_GPUS_ANNOTATION} is unreadable ({e})") from e
    if not gpus:
        raise GpuError(f"node {node}'s agent reports no GPUs")
    return Target(node, gpus, node=node)


def _reported_gpu(entry: Json) -> NodeGpu:
    pci = int(str(entry["pci"]), 16)
    name = str(entry["name"])
    found = models.by_pci_id(pci) or models.lookup(name)
    model = found[0] if found else None
    return NodeGpu(int(entry["index"]), pci, name, model, mig_capable=model is not None)


def _name(node: Json) -> str:
    return str((node.get("metadata") or {}).get("name", ""))
