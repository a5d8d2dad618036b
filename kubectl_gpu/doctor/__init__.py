"""`kubectl gpu doctor`: layer-by-layer verdicts on a GPU pod, and on the cluster's GPUs.

Owns the order of investigation a GPU pod's failure calls for: API admission (the spec and
quotas), then, while it has no node, scheduler placement; once it has one, kubelet allocation;
and, for every pod, runtime injection and the host driver as containers report them. Each layer
lives in its own module and takes plain facts (facts.py) built by the workflow from API
objects. Must not do I/O. Pure: standard library and the sibling domain packages.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from kubectl_gpu.doctor import admission, health, nodeside, scheduler
from kubectl_gpu.doctor.facts import Event, Node, Pod, Quota
from kubectl_gpu.doctor.model import Diagnosis, has_errors, ordered
from kubectl_gpu.doctor.nodeside import PluginOnNode

__all__ = [
    "Diagnosis",
    "PluginOnNode",
    "PodCase",
    "diagnose_pod",
    "has_errors",
    "health",
    "ordered",
]


@dataclasses.dataclass(frozen=True)
class PodCase:
    """Everything gathered about one pod: it, its events, the nodes, quotas, its node's plugin."""

    pod: Pod
    events: Sequence[Event]
    nodes: Sequence[Node]
    quotas: Sequence[Quota] = ()
    plugin: PluginOnNode = PluginOnNode(known=False, pod=None)


def diagnose_pod(case: PodCase) -> tuple[Diagnosis, ...]:
    """The failing layer(s) of one pod, in the order of investigation."""
    pod = case.pod
    found = [*admission.check(pod), *admission.full_quotas(case.quotas, pod.asked())]
    if not pod.node:
        found += scheduler.check(pod, case.nodes, case.events)
    else:
        node = next((n for n in case.nodes if n.name == pod.node), None)
        found += nodeside.kubelet(pod, node, case.plugin, case.events)
    found += nodeside.runtime(pod, case.events)
    if not any(d.severity in ("error", "warning") for d in found):
        found.append(_healthy(pod))
    return ordered(found)


def _healthy(pod: Pod) -> Diagnosis:
    asked = ", ".join(f"{n} {r}" for r, n in sorted(pod.asked().items())) or "no GPUs"
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
