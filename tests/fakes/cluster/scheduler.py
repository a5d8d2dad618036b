"""A minimal kube-scheduler: binds pending pods to nodes with room for their extended resources.

Stand-in backend only (unit-level tests, fault injection): on `backend="real"` Kubernetes'
own controller does this.

Owns filtering in the default plugin order (NodeUnschedulable, TaintToleration, NodeAffinity,
NodeResourcesFit against allocatable minus what bound pods request), a least-allocated choice
among the nodes that fit, binding (`spec.nodeName` plus a `Scheduled` event), and, when no node
fits, the `PodScheduled=False/Unschedulable` condition and a `FailedScheduling` event worded as
kube-scheduler 1.32 words it (`0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s)
had untolerated taint {nvidia.com/gpu: present}. preemption: 0/3 nodes are available: …`). Pods
with `spec.nodeName` (DaemonSet pods) or another schedulerName are left alone. Must not start pods.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable
from typing import Any

from tests.fakes.apiserver import ApiError, Store
from tests.fakes.cluster import events
from tests.fakes.cluster.loop import Change
from tests.fakes.cluster.matching import (
    is_terminal,
    pod_requests,
    quantity,
    selector_matches,
    untolerated_taint,
)
from tests.fakes.cluster.podstatus import now

Obj = dict[str, Any]
ALL = ("all",)
SCHEDULER = "default-scheduler"
_UNRESOLVABLE = "Preemption is not helpful for scheduling"
_NO_VICTIMS = "No preemption victims found for incoming pod"
_UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def _waiting(pod: Obj) -> bool:
    spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
    return (
        not spec.get("nodeName")
        and (spec.get("schedulerName") or "default-scheduler") == "default-scheduler"
        and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
        and not meta.get("deletionTimestamp")
    )


class Scheduler:
    name = "scheduler"

    def __init__(self, store: Store) -> None:
        self.store = store

    def keys_for(self, change: Change) -> Iterable[Hashable]:
        if change.resource == "nodes":
            return [ALL]
        if change.resource != "pods":
            return []
        if change.type != "DELETED" and _waiting(change.obj):
            return [("pod", change.namespace, change.name)]
        # A pod that went away or finished may have freed room for others.
        freed = change.type == "DELETED" or is_terminal(change.obj)
        return [ALL] if freed and (change.obj.get("spec") or {}).get("nodeName") else []

    def reconcile(self, key: Hashable) -> None:
        if key == ALL:
            for pod in self.store.list("pods", field_selector="spec.nodeName="):
                if _waiting(pod):
                    self._schedule(pod)
            return
        assert isinstance(key, tuple)
        try:
            pod = self.store.get("pods", key[2], key[1])
        except ApiError:
            return
        if _waiting(pod):
            self._schedule(pod)

    def _schedule(self, pod: Obj) -> None:
        nodes = sorted(self.store.list("nodes"), key=lambda n: str(n["metadata"]["name"]))
        used = self._used()
        asked = pod_requests(pod)
        fits: list[tuple[float, str]] = []
        failures: list[list[str]] = []
        for node in nodes:
            reasons = _filter(pod, node, asked, used.get(node["metadata"]["name"], Counter()))
            if reasons:
                failures.append(reasons)
            else:
                fits.append((_load(node, asked, used), str(node["metadata"]["name"])))
        if fits:
            self._bind(pod, min(fits)[1])
        else:
            self._unschedulable(pod, _fit_error(len(nodes), failures))

    def _used(self) -> dict[str, Counter[str]]:
        used: dict[str, Counter[str]] = {}
        for pod in self.store.list("pods"):
            node = (pod.get("spec") or {}).get("nodeName")
            if node and not is_terminal(pod):
                used.setdefault(node, Counter()).update(pod_requests(pod))
        return used

    def _bind(self, pod: Obj, node: str) -> None:
        meta = pod["metadata"]
        self.store.patch(
            "pods", meta["name"], {"spec": {"nodeName": node}}, namespace=meta["namespace"]
        )
        message = f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}"
        events.record(
            self.store, pod, "Scheduled", message, events.Source(SCHEDULER, warning=False)
        )

    def _unschedulable(self, pod: Obj, message: str) -> None:
        conditions = (pod.get("status") or {}).get("conditions") or []
        current: Obj = next((c for c in conditions if c.get("type") == "PodScheduled"), {})
        if current.get("status") == "False" and current.get("message") == message:
            return
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": now(),
        }
        meta = pod["metadata"]
        body = {"status": {"phase": "Pending", "conditions": [condition]}}
        self.store.patch("pods", meta["name"], body, namespace=meta["namespace"], status=True)
        events.record(self.store, pod, "FailedScheduling", message, events.Source(SCHEDULER))


def _filter(pod: Obj, node: Obj, asked: dict[str, int], used: Counter[str]) -> list[str]:
    """Why `node` cannot take `pod` (first failing filter plugin), or [] when it fits."""
    spec = pod.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    if (node.get("spec") or {}).get("unschedulable") and not any(
        t.get("key") == _UNSCHEDULABLE_TAINT["key"]
        or (not t.get("key") and t.get("operator") == "Exists")
        for t in tolerations
    ):
        return ["node(s) were unschedulable"]
    taint = untolerated_taint(node, tolerations)
    if taint is not None:
        return [f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"]
    if not selector_matches(node, spec):
        return ["node(s) didn't match Pod's node affinity/selector"]
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return [
        f"Insufficient {resource}"
        for resource, amount in sorted(asked.items())
        if amount > quantity(allocatable.get(resource, 0)) - used[resource]
    ]


def _load(node: Obj, asked: dict[str, int], used: dict[str, Counter[str]]) -> float:
    """The share of the asked resources already taken on `node` (least allocated wins)."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    taken = used.get(node["metadata"]["name"], Counter())
    shares = [taken[r] / max(quantity(allocatable.get(r, 0)), 1) for r in asked]
    return sum(shares) / len(shares) if shares else float(sum(taken.values()))


def _fit_error(total: int, failures: list[list[str]]) -> str:
    """FitError.Error() in kube-scheduler 1.32: sorted "<count> <reason>" histograms."""
    if total == 0:
        return "no nodes available to schedule pods"
    reasons: Counter[str] = Counter(r for node in failures for r in node)
    preemption: Counter[str] = Counter(
        _NO_VICTIMS if all(r.startswith("Insufficient") for r in node) else _UNRESOLVABLE
        for node in failures
    )
    head = ", ".join(sorted(f"{n} {reason}" for reason, n in reasons.items()))
    tail = ", ".join(sorted(f"{n} {reason}" for reason, n in preemption.items()))
    return (
        f"0/{total} nodes are available: {head}. preemption: 0/{total} nodes are available: {tail}."
    )
