"""Waiting for nodes to advertise what their new config promises: physical × replicas.

Owns `--wait`: watch the nodes' `status.allocatable` for the expected resource name until it
equals the plan's expectation (or, when the physical count is unknown, a positive multiple of
the replicas), logging progress on stderr, until a deadline. The nodes are read through one
LIST and one watch (`workflows.watched`; one LIST per look with an injected clock or where
the user may not watch), so a look costs no request and a 5,000-node wait no GET per node.
Must not restart anything.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any

from kubectl_gpu import cluster, numbers
from kubectl_gpu.sharing import rollout
from kubectl_gpu.workflows.waiting import Deadline, Timing
from kubectl_gpu.workflows.watched import Watched, picked

log = logging.getLogger(__name__)
Json = dict[str, Any]
_KEPT = {"metadata": ("name", "uid"), "status": ("allocatable",)}


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
    """Look until every node matches its expectation or `timeout` seconds pass, or `stop`
    gives a reason (returned with the readings: "" when none) to wait no longer."""
    deadline = timing.deadline(timeout)
    readings: dict[str, Reading] = {}
    pending = {n.node: n for n in nodes}
    if not pending:
        return readings, ""

    def keep(node: Json) -> Json | None:
        name = (node.get("metadata") or {}).get("name")
        return picked(node, _KEPT) if name in pending else None

    said = ""
    with Watched(api, cluster.path("nodes"), keep, timing) as view:
        while True:
            seen = {str((n.get("metadata") or {}).get("name")): n for n in view.look()}
            for name, planned in sorted(pending.items()):
                readings[name] = _read(seen.get(name, {}), planned, deadline)
            pending = {n: p for n, p in pending.items() if not readings[n].matched}
            if not pending or deadline.passed:
                return readings, ""
            reason = stop() if stop is not None else ""
            if reason:
                return readings, reason
            said = _progress(readings, pending, said)
            if timing.live:  # woken by the watch, or once a second for `stop`
                view.pause(min(1.0, max(0.0, deadline.end - timing.clock())))
            else:
                deadline.pause()


def _read(node: Json, planned: rollout.NodePlan, deadline: Deadline) -> Reading:
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
