"""Waiting for nodes to advertise what their new config promises: physical × replicas.

Owns `--wait`: poll each node's `status.allocatable` for the expected resource name until it
equals the plan's expectation (or, when the physical count is unknown, a positive multiple of
the replicas), logging progress on stderr, until a deadline. Must not restart anything.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence

from kubectl_gpu import cluster, numbers
from kubectl_gpu.sharing import rollout
from kubectl_gpu.workflows.waiting import Deadline, Timing

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Reading:
    """A node's allocatable of the expected resource, and whether (and when) it matched."""

    node: str
    allocatable: int
    matched: bool
    seconds: float


def wait(
    api: cluster.Api,
    nodes: Sequence[rollout.NodePlan],
    timeout: float,
    timing: Timing,
    stop: Callable[[], str] | None = None,
) -> tuple[dict[str, Reading], str]:
    """Poll until every node matches its expectation or `timeout` seconds pass, or `stop`
    gives a reason (returned with the readings: "" when none) to wait no longer."""
    deadline = timing.deadline(timeout)
    readings: dict[str, Reading] = {}
    pending = {n.node: n for n in nodes}
    said = ""
    while True:
        for name, planned in sorted(pending.items()):
            readings[name] = _read(api, planned, deadline)
        pending = {n: p for n, p in pending.items() if not readings[n].matched}
        if not pending or deadline.passed:
            return readings, ""
        reason = stop() if stop is not None else ""
        if reason:
            return readings, reason
        said = _progress(readings, pending, said)
        deadline.pause()


def _read(api: cluster.Api, planned: rollout.NodePlan, deadline: Deadline) -> Reading:
    node = api.get(cluster.path("nodes", planned.node))
    raw = ((node.get("status") or {}).get("allocatable") or {}).get(planned.resource, "0")
    value = numbers.whole(raw) or 0
    if planned.expected is not None:
        matched = value == planned.expected
    else:
        matched = value > 0 and value % planned.replicas == 0
    return Reading(planned.node, value, matched, deadline.elapsed())


def _progress(readings: dict[str, Reading], pending: dict[str, rollout.NodePlan], said: str) -> str:
    parts = [
        f"{name} {readings[name].allocatable}/{p.expected if p.expected is not None else '?'} "
        f"{p.resource}"
        for name, p in sorted(pending.items())
    ]
    line = f"waiting for {len(pending)} node(s): " + ", ".join(parts)
    if line != said:
        log.info("%s", line)
    return line
