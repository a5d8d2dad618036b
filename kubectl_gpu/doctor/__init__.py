"""`kubectl gpu doctor`: layer-by-layer verdicts on a GPU pod, and on the cluster's GPUs.

Owns the order of investigation a GPU pod's failure calls for: API admission (the spec and
quotas), then, while it has no node, scheduler placement; its ResourceClaims (the DRA layer);
once it has a node, kubelet allocation;
and, for every pod, runtime injection and the host driver as container statuses, events and
log tails report them. Each layer
lives in its own module and takes plain facts (facts.py) built by the workflow from API
objects. Must not do I/O. Pure: standard library and the sibling domain packages.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from kubectl_gpu.doctor import (
    admission,
    containerlogs,
    dra,
    drafacts,
    health,
    neighbours,
    nodeside,
    scheduler,
)
from kubectl_gpu.doctor.containerlogs import ContainerLog
from kubectl_gpu.doctor.dra import DraCase
from kubectl_gpu.doctor.facts import Event, Node, Pod, Quota
from kubectl_gpu.doctor.model import Diagnosis, has_errors, ordered
from kubectl_gpu.doctor.neighbours import OutOfMemory
from kubectl_gpu.doctor.nodeside import PluginOnNode
from kubectl_gpu.sharing.rollout.status import NodeStatus

__all__ = [
    "ContainerLog",
    "Diagnosis",
    "DraCase",
    "OutOfMemory",
    "PluginOnNode",
    "PodCase",
    "diagnose_pod",
    "has_errors",
    "health",
    "ordered",
]


@dataclasses.dataclass(frozen=True)
class PodCase:
    """Everything gathered about one pod: it, its events, the nodes, quotas, its node's plugin,
    the tails of its container logs, its DRA side (None: it uses no claim), and, when it ran
    out of GPU memory, what its GPU holds."""

    pod: Pod
    events: Sequence[Event]
    nodes: Sequence[Node]
    quotas: Sequence[Quota] = ()
    plugin: PluginOnNode = PluginOnNode(known=False, pod=None)
    logs: Sequence[ContainerLog] = ()
    survey: Sequence[NodeStatus] = ()  # the device plugin per GPU node, when it was found
    stuck: Mapping[str, Sequence[str]] = dataclasses.field(default_factory=dict)  # by node
    dra: DraCase | None = None
    oom: OutOfMemory | None = None  # a CUDA out-of-memory and its GPU's holders (neighbours)


def diagnose_pod(case: PodCase) -> tuple[Diagnosis, ...]:
    """The failing layer(s) of one pod, in the order of investigation; one finding per cause."""
    pod = case.pod
    found = [*admission.check(pod), *admission.full_quotas(case.quotas, pod.asked())]
    claims = [] if case.dra is None else dra.check(pod, case.nodes, case.events, case.dra)
    if not pod.node:
        placed = scheduler.check(pod, case.nodes, case.events, case.survey, case.stuck)
        found += _folded(placed, claims) if case.dra and not case.dra.claims else placed + claims
        found += scheduler.unexplained(pod, case.events, found)
    else:
        node = next((n for n in case.nodes if n.name == pod.node), None)
        stuck = case.stuck.get(pod.node, ())
        found += nodeside.kubelet(pod, node, case.plugin, case.events, stuck)
        found += claims
    found += nodeside.runtime(pod, case.events)
    found += _unreported(found, containerlogs.check(pod, case.logs))
    found += neighbours.check(pod, case.oom)
    if not any(d.severity in ("error", "warning") for d in found):
        found.append(_healthy(pod, case.dra))
    return ordered(found)


def _folded(placed: list[Diagnosis], served: list[Diagnosis]) -> list[Diagnosis]:
    """A pod with no claim whose `nvidia.com/gpu` a DeviceClass also serves through DRA
    (KEP-5004): where the scheduler layer already names why it does not fit, what DRA's
    devices offer is evidence of that one cause, not a second finding."""
    errors = [i for i, d in enumerate(placed) if d.severity == "error"]
    if not errors or not served:
        return placed + served
    first = placed[errors[0]]
    through = tuple(f"through DRA: {d.message}" for d in served)
    folded = dataclasses.replace(first, evidence=(*first.evidence, *through))
    return [folded if i == errors[0] else d for i, d in enumerate(placed)]


def _unreported(found: Sequence[Diagnosis], from_logs: Sequence[Diagnosis]) -> list[Diagnosis]:
    """Log verdicts whose line a status message already showed (FallbackToLogsOnError) add
    nothing but noise."""
    shown = [e for d in found for e in d.evidence]
    return [d for d in from_logs if not any(_line(d) in e for e in shown)]


def _line(found: Diagnosis) -> str:
    return found.evidence[0].split(" log: ", 1)[-1]


def _healthy(pod: Pod, claims: DraCase | None) -> Diagnosis:
    held = [f"{n} {r}" for r, n in sorted(pod.asked().items())]
    held += drafacts.held(claims.claims, claims.devices) if claims is not None else []
    asked = ", ".join(held) or "no GPUs"
    where = f" on node {pod.node}" if pod.node else ""
    return Diagnosis(
        "runtime",
        "info",
        pod.ref,
        f"no GPU problem found: the pod is {pod.phase}{where} with {asked}",
        tuple(f"container {s.name}: {_state(s.started, s.reason)}" for s in pod.states),
        "",
    )


def _state(started: bool, reason: str) -> str:
    return reason or ("running" if started else "not started")
