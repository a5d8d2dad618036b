"""Whether `--wait` can succeed on each node of a sharing plan, decided before anything is
written.

Owns the rule: sharing multiplies the devices a node already advertises, so a node whose
device plugin is up (some `nvidia.com/*` allocatable) but advertises none of the resource
(plain or `.shared`) can never reach physical × replicas: a resource no such node has, or
`nvidia.com/gpu` on a node whose GPUs are all in MIG mode. A node whose plugin advertises
nothing at all is left to the wait (it may be starting). Must not read the cluster. Pure.
"""

from __future__ import annotations

from kubectl_gpu import keys
from kubectl_gpu.sharing import names
from kubectl_gpu.sharing.rollout.plan import Plan
from kubectl_gpu.sharing.rollout.state import ClusterState

GPU = "nvidia.com/gpu"


def problems(state: ClusterState, plan: Plan) -> list[str]:
    """Why `--wait` would run out its timeout, one line per node that cannot succeed."""
    found = []
    for planned in plan.nodes:
        node = state.node(planned.node)
        if node is None or not any(n > 0 for n in node.allocatable.values()):
            continue
        base = planned.resource.removesuffix(names.SHARED_SUFFIX)
        if node.allocatable.get(base, 0) or node.allocatable.get(base + names.SHARED_SUFFIX, 0):
            continue
        mig = sorted(
            r for r, n in node.allocatable.items() if r.startswith(keys.MIG_RESOURCE_PREFIX) and n
        )
        if base == GPU and mig:
            found.append(
                f"node {node.name}: every GPU is in MIG mode, so it advertises no {GPU} to share "
                f"(it advertises {', '.join(mig)}); share one of those with --resource"
            )
        else:
            have = ", ".join(sorted(r for r, n in node.allocatable.items() if n)) or "nothing"
            found.append(f"node {node.name} has no {base} to share (it advertises {have})")
    return found
