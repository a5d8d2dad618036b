"""`kubectl gpu doctor` without a pod: the cluster's GPU health, node by node.

Owns the cluster-wide verdicts: GPUs the plugin marked unhealthy (allocatable < capacity), GPU
nodes advertising nothing, MIG `single` nodes with an invalid layout (GFD's `-MIG-INVALID`
product), MIG reconfiguration failed or still pending (the operator's and our state labels),
GPU nodes without a GPU taint, GPU pods that choose no product where several exist, and the
sharing survey's problems (capacity ≠ physical × replicas, labels naming missing keys, plugin
pods missing or failing; kubectl_gpu.sharing.rollout.status) turned into diagnoses. Pure:
standard library, keys and the sharing survey's rows.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubectl_gpu import keys
from kubectl_gpu.doctor import placement
from kubectl_gpu.doctor.facts import Node, Pod
from kubectl_gpu.doctor.model import Diagnosis
from kubectl_gpu.sharing.rollout.status import NodeStatus

INVALID_MIG = "-MIG-INVALID"
NVIDIA_LABEL_PREFIX = "nvidia.com/gpu."
MAX_LISTED = 20


def check(
    nodes: Sequence[Node], pods: Sequence[Pod], survey: Sequence[NodeStatus] | None
) -> list[Diagnosis]:
    """Every GPU health problem these facts show (survey None: no device plugin found)."""
    gpu_nodes = [n for n in nodes if n.is_gpu_node]
    found: list[Diagnosis] = []
    for node in gpu_nodes:
        found += [*_unhealthy(node), *_advertises_nothing(node), *_mig(node), *_taint(node)]
    found += _survey(survey or ())
    found += _no_product_choice(gpu_nodes, pods)
    return found


def _unhealthy(node: Node) -> list[Diagnosis]:
    found = []
    for resource, capacity in sorted(node.capacity.items()):
        allocatable = node.allocatable.get(resource, 0)
        if allocatable >= capacity:
            continue
        found.append(
            Diagnosis(
                "driver",
                "error",
                node.ref,
                f"{capacity - allocatable} of {capacity} {resource} on node {node.name} are "
                "unhealthy: the device plugin took them out of allocatable",
                (f"capacity {resource}={capacity}, allocatable {resource}={allocatable}",),
                f"look for Xid errors on {node.name} (dmesg, nvidia-smi -q); drain the node "
                "and reset or replace the GPU",
            )
        )
    return found


def _advertises_nothing(node: Node) -> list[Diagnosis]:
    if any(node.capacity.values()):
        return []
    return [
        Diagnosis(
            "kubelet",
            "error",
            node.ref,
            f"GPU node {node.name} advertises no GPUs",
            (f"labels say GPUs are present; capacity {dict(node.capacity) or 'none'}",),
            "the device plugin is not running or not registered there: check its pod on the "
            "node (kubectl gpu share show) and its logs",
        )
    ]


def _mig(node: Node) -> list[Diagnosis]:
    found = []
    product = node.labels.get(keys.GPU_PRODUCT_LABEL, "")
    if product.endswith(INVALID_MIG):
        found.append(
            Diagnosis(
                "kubelet",
                "error",
                node.ref,
                f"node {node.name} runs MIG strategy single with an invalid layout",
                (f"{keys.GPU_PRODUCT_LABEL}={product}",),
                "strategy single needs MIG on every GPU, each with the same one profile: "
                "apply a uniform layout (kubectl gpu mig apply) or use migStrategy mixed",
            )
        )
    for label in (keys.MIG_CONFIG_STATE_LABEL, keys.MIG_STATE_LABEL):
        state = node.labels.get(label, "")
        if state not in ("failed", "pending", "rebooting"):
            continue
        reason = node.annotations.get(keys.MIG_REASON_ANNOTATION, "")
        found.append(
            Diagnosis(
                "driver",
                "error" if state == "failed" else "info",
                node.ref,
                f"MIG reconfiguration on node {node.name} is {state}",
                tuple(x for x in (f"{label}={state}", reason and f"reason: {reason}") if x),
                "read the MIG manager's (or agent's) log on the node; a GPU in use cannot be "
                "repartitioned: drain GPU pods first"
                if state == "failed"
                else "wait; if it stays, check the MIG manager's (or agent's) pod on the node",
            )
        )
    return found


def _taint(node: Node) -> list[Diagnosis]:
    if any(t.key.startswith("nvidia.com/") and t.effect in placement.BLOCKING for t in node.taints):
        return []
    return [
        Diagnosis(
            "scheduler",
            "warning",
            node.ref,
            f"GPU node {node.name} has no GPU taint: pods without GPUs can fill it",
            (f"taints: {', '.join(map(str, node.taints)) or 'none'}",),
            f"kubectl taint node {node.name} nvidia.com/gpu=present:NoSchedule (GPU pods "
            "then need the toleration; the device plugin DaemonSets already have it)",
        )
    ]


def _survey(rows: Sequence[NodeStatus]) -> list[Diagnosis]:
    return [
        Diagnosis(
            "kubelet",
            "warning" if problem.startswith("GFD label") else "error",
            f"node/{row.node}",
            problem,
            (row.explain(),),
            "kubectl gpu share show explains the config each node reads",
        )
        for row in rows
        for problem in row.problems
    ]


def _no_product_choice(gpu_nodes: Sequence[Node], pods: Sequence[Pod]) -> list[Diagnosis]:
    products = sorted(
        {n.labels[keys.GPU_PRODUCT_LABEL] for n in gpu_nodes if keys.GPU_PRODUCT_LABEL in n.labels}
    )
    if len(products) < 2:
        return []
    loose = [
        p
        for p in pods
        if p.asked()
        and p.phase not in ("Succeeded", "Failed")
        and not any(k.startswith(NVIDIA_LABEL_PREFIX) for k in placement.selector_keys(p))
    ]
    if not loose:
        return []
    return [
        Diagnosis(
            "scheduler",
            "warning",
            "pods",
            f"{len(loose)} GPU pod(s) choose no GPU product, and the cluster has "
            f"{len(products)}: {', '.join(products)}",
            tuple(f"pod {p.namespace}/{p.name}: {p.asked()}" for p in loose[:MAX_LISTED]),
            f"select a product: nodeSelector {{{keys.GPU_PRODUCT_LABEL}: <product>}} "
            "(or node affinity on it)",
        )
    ]
