"""Taking a node's GPU pods off it safely before a change, and giving the node back after.

Owns the steps of `--drain` on one node (gpu-operator#262 asks admins to do them by hand):
cordon (unless already cordoned), evict the pods the change hits through the Eviction API
(`pods/eviction`, so PodDisruptionBudgets are honoured; a refused eviction is retried until
`--drain-timeout`, then the run stops naming the budget; pods are never deleted directly),
wait for them to be gone, and after the change uncordon (only a node this drain cordoned).
Every step is recorded on the Node (`kubectl-gpu.io/drain`: the change, the step, whether
we cordoned it, the pods, since when) before it is taken, so that a run that was interrupted
is resumed by running it again, or undone by `kubectl gpu mig recover NODE`. The record goes in
the same PATCH as the cordon (and leaves in the same PATCH as the uncordon), and a run reads a
node's record once, at its first step, then writes each step from what it wrote last: a few
requests per node, however many steps. Before any of that, pods no controller recreates are
refused unless --force, as `kubectl drain` refuses them (`unmanaged`). Must not decide which
pods are hit (kubectl_gpu.doctor.preview does).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
from collections.abc import Sequence
from typing import Any

from kubectl_gpu import cluster, errors, keys
from kubectl_gpu.doctor.preview import Hit
from kubectl_gpu.mig import stuck
from kubectl_gpu.workflows.waiting import Timing

log = logging.getLogger(__name__)
Json = dict[str, Any]


class DrainBlocked(errors.GpuError):
    """A pod could not be evicted in time (a PodDisruptionBudget, or it would not go)."""


def unmanaged(node: str, hits: Sequence[Hit], force: bool) -> str:
    """`kubectl drain`'s refusal of pods that declare no controller, for `node`'s pods the
    change hits ("" when there are none; with --force, a warning instead): evicting such a pod
    deletes it for good, nothing recreates it elsewhere."""
    lost = [h.ref for h in hits if h.unmanaged]
    if not lost:
        return ""
    names = ", ".join(lost)
    if force:
        log.warning("node %s: evicting Pods that declare no controller: %s", node, names)
        return ""
    return f"cannot evict Pods that declare no controller (use --force to override): {names}"


@dataclasses.dataclass(frozen=True)
class Drain:
    """What a drain is for, and how long an eviction may keep being refused."""

    change: str  # e.g. "mig apply all-3g@0123456789ab", recorded on the node
    timeout: float = 300.0  # --drain-timeout, per node
    timing: Timing = Timing()
    # the record this run last wrote on each node: a later step builds on it, unread
    written: dict[str, Json] = dataclasses.field(default_factory=dict, compare=False, repr=False)


def begin(api: cluster.Api, node: str, drain: Drain, pods: Sequence[str]) -> None:
    """Record the drain and cordon the node in one write (remembering whether it was cordoned
    already): the record is never missing from a node this drain cordoned."""
    current = api.get(cluster.path("nodes", node))
    earlier = record_of(current)
    was = bool((current.get("spec") or {}).get("unschedulable"))
    # resuming: a node an earlier run of ours cordoned is still ours to uncordon
    ours = bool(earlier.get("cordoned")) if earlier else not was
    body = _record_body(drain, node, earlier, "cordoning", cordoned=ours, pods=list(pods))
    if not was:
        log.info("node %s: cordoning", node)
        body["spec"] = {"unschedulable": True}
    api.patch(cluster.path("nodes", node), body)


def evict(api: cluster.Api, node: str, drain: Drain, pods: Sequence[str]) -> None:
    """Evict each `namespace/name` and wait until all are gone; DrainBlocked on a timeout."""
    _record(api, node, drain, "evicting")
    deadline = drain.timing.deadline(drain.timeout)
    left = list(pods)
    refusal = ""
    while left:
        for ref in list(left):
            namespace, name = ref.split("/", 1)
            try:
                api.evict(namespace, name)
                log.info("node %s: evicted pod %s", node, ref)
                left.remove(ref)
            except errors.ClusterError as e:
                if e.status == 404:
                    left.remove(ref)  # gone already
                elif e.status == 429:
                    refusal = f"pod {ref}: {e.message}"
                else:
                    raise
        if left and deadline.passed:
            raise DrainBlocked(
                f"node {node}: could not evict {', '.join(left)} in {drain.timeout:g}s: {refusal}",
                hint="the node stays cordoned and nothing was changed on it; relax the "
                "PodDisruptionBudget or move the workload, then run the same command again "
                f"(it resumes), or undo with `kubectl gpu mig recover {node} --force`",
            )
        if left:
            deadline.pause()
    _await_gone(api, node, drain, pods)


def applying(api: cluster.Api, node: str, drain: Drain) -> None:
    _record(api, node, drain, "applying")


def finish(api: cluster.Api, node: str, drain: Drain) -> None:
    """Drop the record and, if this drain cordoned the node, uncordon it, in one write."""
    record = drain.written.pop(node, None)
    if record is None:  # not begun in this run: what the node says
        record = record_of(api.get(cluster.path("nodes", node)))
    body: Json = {"metadata": {"annotations": {keys.DRAIN_ANNOTATION: None}}}
    if record.get("cordoned"):
        log.info("node %s: uncordoning", node)
        body["spec"] = {"unschedulable": None}
    api.patch(cluster.path("nodes", node), body)


def failed(api: cluster.Api, node: str, drain: Drain, step: str, reason: str) -> None:
    """Record where the drain stopped; the node stays cordoned for a person to look at."""
    _record(api, node, drain, step, reason=reason)


def record_of(node: Json) -> Json:
    """The drain record on a Node ({} when there is none or it is unreadable)."""
    text = ((node.get("metadata") or {}).get("annotations") or {}).get(keys.DRAIN_ANNOTATION)
    try:
        found = json.loads(text) if text else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _record(api: cluster.Api, node: str, drain: Drain, step: str, **fields: Any) -> None:
    current = drain.written.get(node)
    if current is None:  # not begun in this run: build on what the node says
        current = record_of(api.get(cluster.path("nodes", node)))
    api.patch(cluster.path("nodes", node), _record_body(drain, node, current, step, **fields))


def _record_body(drain: Drain, node: str, current: Json, step: str, **fields: Any) -> Json:
    """The PATCH body that records `step` on `node` (building on `current`), remembered as
    what this run last wrote there."""
    now = stuck.timestamp(dt.datetime.now(dt.timezone.utc))
    record = {**current, "change": drain.change, "step": step, "since": now, **fields}
    drain.written[node] = record
    text = json.dumps(record, sort_keys=True)
    return {"metadata": {"annotations": {keys.DRAIN_ANNOTATION: text}}}


def _await_gone(api: cluster.Api, node: str, drain: Drain, pods: Sequence[str]) -> None:
    """Evicted pods terminate gracefully; the devices are free only once they are gone."""
    deadline = drain.timing.deadline(drain.timeout)
    while True:
        left = [ref for ref in pods if _exists(api, ref)]
        if not left:
            return
        if deadline.passed:
            raise DrainBlocked(
                f"node {node}: evicted pods still terminating after {drain.timeout:g}s: "
                f"{', '.join(left)}",
                hint="run the same command again once they are gone (it resumes)",
            )
        deadline.pause()


def _exists(api: cluster.Api, ref: str) -> bool:
    namespace, name = ref.split("/", 1)
    try:
        api.get(cluster.path("pods", name, namespace))
    except errors.ClusterError as e:
        if e.status == 404:
            return False
        raise
    return True
