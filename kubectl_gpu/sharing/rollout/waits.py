"""Whether `--wait` can succeed on each node of a sharing plan, decided before anything is
written.

Owns the rule: sharing multiplies the devices a node already advertises, so a node whose
device plugin is up (some `nvidia.com/*` allocatable) but advertises none of the resource
(plain or `.shared`) can never reach physical × replicas: a resource no such node has, or
`nvidia.com/gpu` on a node whose GPUs are all in MIG mode. While a node's plugin restarts
(right after a change) or its GPUs are unhealthy, kubelet keeps its capacity and sets its
allocatable to 0: its capacity then says what it advertises. A node whose plugin never
advertised anything is left to the wait (it may be starting). Must not read the cluster. Pure.
"""

from __future__ import annotations

from kubectl_gpu import keys
from kubectl_gpu.sharing import names
from kubectl_gpu.sharing.rollout.nodes import GpuNode
from kubectl_gpu.sharing.rollout.plan import Plan
from kubectl_gpu.sharing.rollout.state import ClusterState

GPU = "nvidia.com/gpu"


def problems(state: ClusterState, plan: Plan) -> list[str]:
    """Why `--wait` would run out its timeout, one line per node that cannot succeed."""
    found = []
    for planned in plan.nodes:
        node = state.node(planned.node)
        if node is None:
            continue
        advertised, restarting = _advertised(node)
        if not advertised:
            continue
        base = planned.resource.removesuffix(names.SHARED_SUFFIX)
        if base in advertised or base + names.SHARED_SUFFIX in advertised:
            continue
        mig = [r for r in advertised if r.startswith(keys.MIG_RESOURCE_PREFIX)]  # sorted
        all_mig = base == GPU and bool(mig)
        have = ", ".join(mig if all_mig else advertised)
        if restarting:
            have += "; none allocatable now: its plugin is restarting or its GPUs are unhealthy"
        if all_mig:
            found.append(
                f"node {node.name}: every GPU is in MIG mode, so it advertises no {GPU} to share "
                f"(it advertises {have}); share one of those with --resource"
            )
        else:
            found.append(f"node {node.name} has no {base} to share (it advertises {have})")
    return found


def _advertised(node: GpuNode) -> tuple[list[str], bool]:
    """The node's `nvidia.com/*` resources above 0, sorted, and whether they come from its
    capacity because its plugin is restarting (nothing allocatable). Empty when its plugin
    never advertised anything."""
    allocatable = sorted(r for r, n in node.allocatable.items() if n > 0)
    if allocatable:
        return allocatable, False
    capacity = sorted(r for r, n in node.capacity.items() if n > 0)
    return capacity, bool(capacity)
