"""Untolerated taints as the reason a pending GPU pod has no node.

Owns the taint verdicts of the scheduler layer: blocking (NoSchedule, NoExecute) taints the pod
does not tolerate on the GPU nodes its selectors allow (errors where GPUs are free there,
warnings elsewhere), and the taints the scheduler's FailedScheduling event reports that those
do not explain (named by the event in older releases; counted but unnamed in 1.34 and 1.37,
then named from the GPU nodes read). Must not weigh anything but taints (scheduler.py does).
Pure: standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kubectl_gpu.doctor import placement
from kubectl_gpu.doctor.facts import Event, Node, Pod, Taint
from kubectl_gpu.doctor.model import Diagnosis


def free(node: Node, asked: dict[str, int]) -> str:
    """What a node has free of each asked resource, for evidence."""
    return ", ".join(f"{node.free(r)}/{node.allocatable.get(r, 0)} {r} free" for r in sorted(asked))


def blocking(
    pod: Pod, gpu_nodes: Sequence[Node], roomy: Sequence[Node], asked: dict[str, int]
) -> list[Diagnosis]:
    """Blocking taints not tolerated; errors where GPUs are free, warnings elsewhere. Only on
    nodes the pod's selectors allow: a taint elsewhere changes nothing for it."""
    selected = [n for n in gpu_nodes if not placement.unmet(pod, n)]
    roomy = [n for n in roomy if n in selected]
    pool = roomy or [n for n in selected if any(n.allocatable.get(r) for r in asked)]
    found = []
    for taint, blocked in _by_taint(pod, pool):
        names = ", ".join(n.name for n in blocked)
        room = "free GPUs" if roomy else "GPUs (none free now)"
        found.append(
            Diagnosis(
                "scheduler",
                "error" if roomy else "warning",
                pod.ref,
                f"untolerated taint {taint} on {len(blocked)} node(s) with {room}: {names}",
                tuple(f"node {n.name}: taint {taint}; free {free(n, asked)}" for n in blocked),
                "add to the pod spec: tolerations: [{key: "
                f"{taint.key}, operator: Exists, effect: {taint.effect}}}]",
            )
        )
    return found


_EVENT_TAINT = re.compile(
    r"had untolerated taints?(?:\(s\))? \{(?P<key>[^:{}]+): ?(?P<value>[^{}]*)\}"
)
# kube-scheduler 1.34.4 and 1.37.2 count the nodes but name no taint: "1 node(s) had untolerated
# taint(s)"; doctor names the taints itself from the nodes it reads
_UNNAMED_TAINT = re.compile(r"had untolerated taints?(?:\(s\))?$")


def in_event(
    pod: Pod, gpu_nodes: Sequence[Node], latest: Event | None, found: Sequence[Diagnosis]
) -> list[Diagnosis]:
    """Untolerated taints the scheduler's event reports that no finding above explains (on
    nodes doctor did not weigh for this pod, or cannot read): the scheduler's word stands."""
    fit = placement.parse_fit_error(latest.message) if latest else None
    named, unnamed = [], False
    for count, reason in fit.reasons if fit else ():
        taint = _EVENT_TAINT.search(reason)
        if taint and not any(f"taint {taint['key']}" in d.message for d in found):
            named.append((count, taint["key"].strip(), taint["value"].strip()))
        unnamed = unnamed or bool(_UNNAMED_TAINT.search(reason.strip()))
    if unnamed and not any("untolerated taint" in d.message for d in found):
        return _taints_unnamed(pod, gpu_nodes)
    return [  # the event names them (older releases' wording)
        Diagnosis(
            "scheduler",
            "error",
            pod.ref,
            f"untolerated taint {key}={value} on {count} node(s), as the scheduler reports"
            if value
            else f"untolerated taint {key} on {count} node(s), as the scheduler reports",
            (),
            f"if the pod may run there, add to the pod spec: tolerations: [{{key: {key}, "
            "operator: Exists}]; otherwise select other nodes",
        )
        for count, key, value in named
    ]


def _taints_unnamed(pod: Pod, gpu_nodes: Sequence[Node]) -> list[Diagnosis]:
    """The event counts untolerated taints without naming them: name those on the GPU nodes
    the pod selects (a pod that asks no device-plugin resource, a DRA pod, is weighed nowhere
    else). Taints on other nodes (a control plane's) are the scheduler's business alone."""
    selected = [n for n in gpu_nodes if not placement.unmet(pod, n)]
    return [
        Diagnosis(
            "scheduler",
            "error",
            pod.ref,
            f"untolerated taint {taint} on {len(blocked)} GPU node(s): "
            + ", ".join(n.name for n in blocked),
            tuple(f"node {n.name}: taint {taint}" for n in blocked),
            f"add to the pod spec: tolerations: [{{key: {taint.key}, operator: Exists, "
            f"effect: {taint.effect}}}]",
        )
        for taint, blocked in _by_taint(pod, selected)
    ]


def _by_taint(pod: Pod, nodes: Sequence[Node]) -> list[tuple[Taint, list[Node]]]:
    """The pod's untolerated blocking taints on `nodes`, each with the nodes that carry it."""
    by_taint: dict[Taint, list[Node]] = {}
    for node in nodes:
        for taint in placement.untolerated(pod, node):
            by_taint.setdefault(taint, []).append(node)
    return sorted(by_taint.items(), key=lambda item: str(item[0]))
