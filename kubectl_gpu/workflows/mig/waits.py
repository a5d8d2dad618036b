"""`mig apply --wait`: look at each node until its actuator reports a final state for the request.

Owns the wait: the nodes are read with one LIST, made after the request was written (so the
first look sees it), then kept current by one watch (`workflows.watched`, as `share` follows
its pods): a look costs no request, however many nodes wait, and a node's change wakes the wait
(where the user may list but not watch nodes, each look is one LIST). Progress per node on
stderr, and at the deadline the reason each silent node gives (`silence`). A node whose request
another writer replaced meanwhile (a second `mig apply` changed its label, or the config's
content in our ConfigMap) stops being waited for at once, as `replaced`, naming the other
request. A node's row gets its final state, seconds and layout. Must not write anything.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kubectl_gpu import cluster, keys
from kubectl_gpu.errors import ClusterError
from kubectl_gpu.mig import apply
from kubectl_gpu.mig.actuators import Actuator
from kubectl_gpu.workflows.mig import silence, status, targets
from kubectl_gpu.workflows.mig.request import ApplyRequest
from kubectl_gpu.workflows.mig.results import NodeResult
from kubectl_gpu.workflows.mig.targets import NodeFacts, Scope
from kubectl_gpu.workflows.progress import Progress
from kubectl_gpu.workflows.waiting import Deadline, Timing
from kubectl_gpu.workflows.watched import Watched, picked

Json = dict[str, Any]
# what a node's MIG state is read from
_KEPT: dict[str, tuple[str, ...]] = {"metadata": ("name", "labels", "annotations")}


def wait(
    api: cluster.Api, request: ApplyRequest, rows: list[NodeResult], key: str, timing: Timing
) -> None:
    deadline = timing.deadline(request.timeout)
    progress = Progress(timing.heartbeat)
    waiting = list(rows)
    names = {r.node for r in rows}

    def keep(node: Json) -> Json | None:
        return picked(node, _KEPT) if (node.get("metadata") or {}).get("name") in names else None

    stored: str | None = None
    read_at = float("-inf")  # when our ConfigMap was last read
    with Watched(api, cluster.path("nodes"), keep, timing) as view:
        while waiting:
            # a node's events may wake the wait often; our ConfigMap is read once a poll at most
            if any(_ours(r) for r in waiting) and timing.clock() - read_at >= timing.poll:
                stored, read_at = _stored(api, request), timing.clock()
            seen = {str(n["metadata"]["name"]): n for n in view.look()}
            for row in list(waiting):
                facts = _facts(api, row.node, seen.get(row.node))
                # its own final state first: a request that ended was not replaced
                if _look(facts, request, row, deadline, progress) or _replaced(
                    facts, request, row, stored, deadline
                ):
                    waiting.remove(row)
            if waiting and deadline.passed:
                for row in waiting:
                    row.result, row.seconds = "timeout", deadline.elapsed()
                    last = progress.last(row.node)
                    row.reason = silence.reason(api, row.node, row.actuator, last, request.timeout)
                return
            if waiting and timing.live:  # woken by the watch, or at the next poll at the latest
                view.pause(min(timing.poll, max(0.0, deadline.end - timing.clock())))
            elif waiting:
                deadline.pause()


def _facts(api: cluster.Api, name: str, node: Json | None) -> NodeFacts:
    """The node as the watch has it; one it does not have (deleted meanwhile) is read on its
    own, which names a node that is gone."""
    if node is None:
        return targets.read(api, Scope(names=(name,)), [])[0]
    return targets.facts_of(node, [])


def _ours(row: NodeResult) -> bool:
    return row.actuator is Actuator.AGENT


def _stored(api: cluster.Api, request: ApplyRequest) -> str | None:
    """The request key the config's text in our ConfigMap makes now (None: unreadable)."""
    namespace = request.namespace or keys.NAMESPACE
    try:
        found = api.get(cluster.path("configmaps", keys.MIG_CONFIGMAP, namespace))
    except ClusterError:
        return None
    text = ((found.get("data") or {}) if isinstance(found, dict) else {}).get(request.config)
    return apply.request_key(request.config, text) if isinstance(text, str) else None


def _replaced(
    facts: NodeFacts, request: ApplyRequest, row: NodeResult, stored: str | None,
    deadline: Deadline,
) -> bool:  # fmt: skip
    """Another writer (a second `mig apply`, a hand edit) changed the node's request while
    this one waited: it will never be applied, so waiting on is pointless. True when the row
    got that verdict, naming the request that replaced it."""
    label = keys.MIG_CONFIG_LABEL if row.actuator is Actuator.OPERATOR else keys.MIG_DESIRED_LABEL
    desired = facts.labels.get(label, "")
    if desired != request.config:
        other = f"{label}={desired}" if desired else f"no {label} label (withdrawn)"
        why = f"the node now asks for {other}"
    elif _ours(row) and stored is not None and stored != row.request:
        why = (
            f"config {request.config} in ConfigMap {keys.MIG_CONFIGMAP} now holds other content "
            f"(request {stored})"
        )
    else:
        return False
    row.result, row.seconds = "replaced", deadline.elapsed()
    row.reason = (
        f"another writer replaced this request while it waited: {why}; this request "
        f"({row.request}) will not be applied. `kubectl gpu mig status --node {row.node}` shows "
        "what the node does now; run this command again to ask for it once more"
    )
    return True


def _look(
    facts: NodeFacts, request: ApplyRequest, row: NodeResult, deadline: Deadline,
    progress: Progress,
) -> bool:  # fmt: skip
    """One node as read; True when its actuator reached a final state for our request."""
    now = status.of(dataclasses.replace(facts, actuator=row.actuator))
    ours = row.actuator is Actuator.OPERATOR or now.request == row.request
    state = " ".join(p for p in (now.state, now.phase) if p) if ours else ""
    progress.tell(row.node, state or "waiting", deadline.elapsed())
    if not _final(now, row, request):
        return False
    row.result, row.seconds = now.state, deadline.elapsed()
    row.reason = now.reason
    row.layout = {str(g.index): g.layout for g in now.gpus if g.layout}
    if now.state == "failed" and row.actuator is Actuator.AGENT:
        row.reason += (
            " (re-applying unchanged content needs --force: a failed request is not retried)"
        )
    return True


def _final(now: status.NodeStatus, row: NodeResult, request: ApplyRequest) -> bool:
    if row.actuator is Actuator.OPERATOR:
        return now.desired == request.config and now.state in status.OPERATOR_DONE_STATES
    if request.force and now.force == row.request:
        return False  # the agent has not taken up the forced attempt yet
    return now.request == row.request and now.state in status.DONE_STATES
