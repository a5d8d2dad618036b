"""`mig apply --wait`: poll each node until its actuator reports a final state for the request.

Owns the wait: one read of each waiting node per poll, progress per node on stderr, and at the
deadline the reason each silent node gives (`silence`). A node's row gets its final state,
seconds and layout. Must not write anything.
"""

from __future__ import annotations

import dataclasses

from kubectl_gpu import cluster
from kubectl_gpu.mig.actuators import Actuator
from kubectl_gpu.workflows.mig import silence, status, targets
from kubectl_gpu.workflows.mig.request import ApplyRequest
from kubectl_gpu.workflows.mig.results import NodeResult
from kubectl_gpu.workflows.mig.targets import Scope
from kubectl_gpu.workflows.progress import Progress
from kubectl_gpu.workflows.waiting import Deadline, Timing


def wait(
    api: cluster.Api, request: ApplyRequest, rows: list[NodeResult], key: str, timing: Timing
) -> None:
    deadline = timing.deadline(request.timeout)
    progress = Progress(timing.heartbeat)
    waiting = list(rows)
    while waiting:
        for row in list(waiting):
            if _look(api, request, row, deadline, progress):
                waiting.remove(row)
        if waiting and deadline.passed:
            for row in waiting:
                row.result, row.seconds = "timeout", deadline.elapsed()
                last = progress.last(row.node)
                row.reason = silence.reason(api, row.node, row.actuator, last, request.timeout)
            return
        if waiting:
            deadline.pause()


def _look(
    api: cluster.Api, request: ApplyRequest, row: NodeResult, deadline: Deadline,
    progress: Progress,
) -> bool:  # fmt: skip
    """Read one node; True when its actuator reached a final state for our request."""
    facts = targets.read(api, Scope(names=(row.node,)), [])[0]
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
