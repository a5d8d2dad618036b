"""`kubectl gpu doctor` without a pod: the cluster's GPU health, node by node.

Owns the cluster-wide verdicts: GPUs the plugin marked unhealthy (allocatable < capacity), GPU
nodes advertising nothing (unless their device plugin is off on purpose: DRA nodes), MIG
`single` nodes with an invalid layout (GFD's `-MIG-INVALID` product), MIG reconfiguration
failed or still pending (the operator's and our state labels)
or stuck (kubectl_gpu.mig.stuck's reasons, with `mig recover` as the fix), GPU nodes without
a GPU taint, GPU pods that choose no product where several exist, the device plugin failing on
nodes without GPUs, and the sharing survey's problems (capacity ≠ physical × replicas, labels
naming missing keys, plugin pods missing or failing, one finding for a plugin that fails on its
config; kubectl_gpu.sharing.rollout.status) turned into diagnoses; a missing plugin pod its
DaemonSet will not run on the node is said with why (`blocked`: an untolerated taint), and MIG
devices left in capacity once the plugin serves whole GPUs (its strategy became none, as after
`uninstall`) are one warning, never a sick GPU. Pure: standard library,
keys and the sharing survey's rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kubectl_gpu import keys
from kubectl_gpu.doctor import placement
from kubectl_gpu.doctor.facts import Node, Pod
from kubectl_gpu.doctor.model import Diagnosis
from kubectl_gpu.sharing.rollout.status import NodeStatus, PluginPod

GPU = "nvidia.com/gpu"

INVALID_MIG = "-MIG-INVALID"
NVIDIA_LABEL_PREFIX = "nvidia.com/gpu."
MAX_LISTED = 20


def check(  # noqa: PLR0913 - the facts of one cluster view, the last three keyword-only
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    survey: Sequence[NodeStatus] | None,
    *,
    elsewhere: Mapping[str, PluginPod] | None = None,
    stuck: Mapping[str, Sequence[str]] | None = None,
    blocked: Mapping[str, tuple[str, str]] | None = None,
) -> list[Diagnosis]:
    """Every GPU health problem these facts show (survey None: no device plugin found;
    `elsewhere`: the plugin's pods on nodes without GPUs, by node; `stuck`: why a node's MIG
    change is stuck, by node, as kubectl_gpu.mig.stuck tells; `blocked`: why the plugin's
    DaemonSet runs no pod on a node, and the fix, by node)."""
    stuck = stuck or {}
    gpu_nodes = [n for n in nodes if n.is_gpu_node]
    # Where the plugin is down (or paused by a stuck MIG change), allocatable falls to 0 for
    # that reason alone: no GPU is sick.
    down = {row.node for row in survey or () if row.plugin_down} | set(stuck)
    found: list[Diagnosis] = []
    for node in gpu_nodes:
        if node.name not in down:
            found += _unhealthy(node)
        mig = _stuck(node, stuck[node.name]) if node.name in stuck else _mig(node)
        found += [*_advertises_nothing(node), *mig, *_taint(node), *_stale_mig(node)]
    blocked = blocked or {}
    found += [
        d
        for row in survey or ()
        if row.node not in stuck
        for d in _survey(row, None if row.plugin_pod else blocked.get(row.node))
    ]
    found += _plugin_off_gpu_nodes(elsewhere or {})
    found += _no_product_choice(gpu_nodes, pods)
    return found


def _unhealthy(node: Node) -> list[Diagnosis]:
    found = []
    for resource, capacity in sorted(node.capacity.items()):
        allocatable = node.allocatable.get(resource, 0)
        if allocatable >= capacity or _left_by_mig_change(node, resource):
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


def _left_by_mig_change(node: Node, resource: str) -> bool:
    """A resource the plugin stopped advertising when the node's MIG layout changed (whole
    GPUs after MIG was enabled, a profile the new layout lacks) or when the plugin's MIG
    strategy changed (MIG devices, once a plugin with `none` replaced one with `mixed`, as
    `uninstall` may): kubelet keeps it in capacity with allocatable 0 until it restarts. Not a
    GPU that fell sick: those leave the rest of their resource allocatable, and the node here
    advertises other devices instead."""
    if node.allocatable.get(resource, 0):
        return False
    if resource.startswith(keys.MIG_RESOURCE_PREFIX) and node.allocatable.get(GPU, 0) > 0:
        return True  # MIG devices gone, whole GPUs advertised: stale_mig says what it means
    return any(
        amount > 0 and other != resource and other.startswith(keys.MIG_RESOURCE_PREFIX)
        for other, amount in node.allocatable.items()
    )


def _stale_mig(node: Node) -> list[Diagnosis]:
    """MIG devices still in capacity with none allocatable while whole GPUs are advertised:
    the plugin now serves MIG-enabled GPUs (if they still are) as whole ones, which CUDA
    cannot use; one warning per node, never a sick GPU."""
    stale = sorted(
        r
        for r, n in node.capacity.items()
        if r.startswith(keys.MIG_RESOURCE_PREFIX) and n > 0 and not node.allocatable.get(r, 0)
    )
    if not stale or node.allocatable.get(GPU, 0) <= 0:
        return []
    return [
        Diagnosis(
            "kubelet",
            "warning",
            node.ref,
            f"node {node.name} advertises whole GPUs but still lists {', '.join(stale)} with "
            "none allocatable: the device plugin stopped advertising MIG devices (its MIG "
            "strategy became none, or MIG was turned off); if the GPUs are still MIG-enabled, "
            f"pods given {GPU} there cannot use them",
            tuple(f"capacity {r}={node.capacity[r]}, allocatable 0" for r in stale),
            f"check with `kubectl gpu mig status --node {node.name}`; turn MIG off (kubectl gpu "
            "mig apply -c all-disabled) or give the device plugin migStrategy mixed; kubelet "
            "drops the stale resources when it restarts",
        )
    ]


def _advertises_nothing(node: Node) -> list[Diagnosis]:
    if any(node.capacity.values()) or node.device_plugin_off:
        return []  # with its device plugin off on purpose (a DRA node), it advertises nothing
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


def _stuck(node: Node, reasons: Sequence[str]) -> list[Diagnosis]:
    return [
        Diagnosis(
            "driver",
            "error",
            node.ref,
            f"the MIG change on node {node.name} is stuck: {reasons[0]}",
            tuple(reasons),
            f"kubectl gpu mig recover {node.name}",
        )
    ]


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


def _survey(row: NodeStatus, blocked: tuple[str, str] | None = None) -> list[Diagnosis]:
    """The survey's problems on one node; a plugin failing on a bad config is one finding, a
    plugin pod its DaemonSet will not run there (`blocked`: why, and the fix) is said so."""
    crash = row.plugin_down and row.plugin_pod and row.config_error
    found = []
    if blocked is not None:
        found.append(
            Diagnosis(
                "kubelet",
                "error",
                f"node/{row.node}",
                f"no device plugin pod runs on node {row.node}: {blocked[0]}",
                (row.explain(),),
                blocked[1],
            )
        )
    if crash:
        found.append(
            Diagnosis(
                "kubelet",
                "error",
                f"node/{row.node}",
                f"the device plugin on node {row.node} is {row.plugin_status}: {row.config_error}",
                (*(p for p in row.problems if p.startswith("plugin pod ")), row.explain()),
                f"correct key {row.key} of the plugin's ConfigMap (`kubectl gpu validate` "
                "checks it); the plugin then starts",
            )
        )
    for problem in row.problems:
        if crash and (problem == row.config_error or problem.startswith("plugin pod ")):
            continue
        if blocked is not None and problem.startswith("no device plugin pod"):
            continue
        found.append(
            Diagnosis(
                "kubelet",
                "warning" if problem.startswith("GFD label") else "error",
                f"node/{row.node}",
                problem,
                (row.explain(),),
                "kubectl gpu share show explains the config each node reads",
            )
        )
    return found


def _plugin_off_gpu_nodes(elsewhere: Mapping[str, PluginPod]) -> list[Diagnosis]:
    """The plugin failing where there is no GPU (the static manifest runs on every node)."""
    return [
        Diagnosis(
            "kubelet",
            "warning",
            f"pod/{plugin.name}",
            f"the device plugin is {plugin.status} on node {node}, which has no GPU",
            (f"plugin pod {plugin.name} on {node}: {plugin.status} ({plugin.restarts} restarts)",),
            "keep the plugin's DaemonSet off nodes without GPUs (node affinity on "
            f"{'='.join(keys.GPU_NODE_LABELS[0])})",
        )
        for node, plugin in sorted(elsewhere.items())
        if not plugin.running
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
