"""The rows a sharing change returns, and what each step of the rollout makes of them.

Owns `NodeResult` (one row of `kubectl gpu share`'s table, schemas/share-result.v1.json),
`ShareResult` (what a share, off or rollback did or, in a dry run or diff, would do) and the
row transitions: planned, then restarted (or not), then verified
against the capacity read (or timed out). Must not read or write the cluster, nor render.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kubectl_gpu.doctor.preview import Preview
from kubectl_gpu.findings import Finding
from kubectl_gpu.sharing import rollout
from kubectl_gpu.workflows.share import capacity, restarts
from kubectl_gpu.workflows.share.options import Options
from kubectl_gpu.workflows.share.writes import ROLLBACK

Json = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class NodeResult:
    """One row of the result table (schemas/share-result.v1.json)."""

    node: str
    key: str
    strategy: str
    replicas: int
    resource: str
    gpus: int | None
    before: int
    expected: int | None
    after: int | None
    plugin_pod: str
    result: str  # planned | unchanged | restarted | verified | failed | timed-out | not-restarted
    seconds: float | None
    message: str

    @property
    def failed(self) -> bool:
        return self.result in ("failed", "timed-out")


@dataclasses.dataclass(frozen=True)
class ShareResult:
    """What a share, off or rollback did (or, in a dry run or diff, would do)."""

    action: str
    plan: rollout.Plan
    options: Options
    texts: Mapping[str, str]  # the text written under each changed key
    objects: tuple[Json, ...]  # objects written, or that would be written
    nodes: tuple[NodeResult, ...]
    warnings: tuple[Finding, ...]
    preview: Preview | None = None  # dry run, diff, drain: who the change hits

    @property
    def failed(self) -> bool:
        return any(n.failed for n in self.nodes)


def after_restart(
    row: NodeResult, planned: rollout.NodePlan, restart: restarts.Restart | None
) -> NodeResult:
    if restart is None and planned.restart:
        message = "not restarted (--no-restart): the plugin reads a changed key only at start"
        return dataclasses.replace(row, result="not-restarted", message=message)
    if restart is None:
        return row
    if restart.ok:
        return dataclasses.replace(
            row, result="restarted", plugin_pod=restart.pod, seconds=restart.seconds
        )
    outcome, message = "not-restarted", restart.message
    if restart.outcome == "failed":
        outcome = "failed"
        message += f"; restore the previous config with `{ROLLBACK}`"
    return dataclasses.replace(
        row, result=outcome, plugin_pod=restart.pod, seconds=restart.seconds, message=message
    )


def after_wait(
    row: NodeResult, planned: rollout.NodePlan, reading: capacity.Reading | None, timeout: float
) -> NodeResult:
    if reading is None:
        return row
    seconds = round((row.seconds or 0.0) + reading.seconds, 1)
    if reading.matched:
        return dataclasses.replace(
            row, result="verified", after=reading.allocatable, seconds=seconds
        )
    wanted = planned.expected
    expected = str(wanted) if wanted is not None else f"a multiple of {planned.replicas}"
    message = (
        f"allocatable {reading.allocatable} {planned.resource} after {timeout:g}s, "
        f"expected {expected}"
    )
    return dataclasses.replace(
        row, result="timed-out", after=reading.allocatable, seconds=seconds, message=message
    )


def planned_row(planned: rollout.NodePlan, result: str) -> NodeResult:
    return NodeResult(
        node=planned.node,
        key=planned.key,
        strategy=planned.strategy,
        replicas=planned.replicas,
        resource=planned.resource,
        gpus=planned.gpus,
        before=planned.before,
        expected=planned.expected,
        after=planned.expected if result == "planned" else None,  # a dry run's capacity after
        plugin_pod="",
        result=result,
        seconds=None,
        message=planned.reason,
    )


def draft(
    action: str,
    plan: rollout.Plan,
    options: Options,
    rendered: Mapping[str, str],
    warnings: tuple[Finding, ...],
) -> ShareResult:
    result = "planned" if options.previewing or options.dry_run != "none" else "unchanged"
    rows = tuple(planned_row(n, result) for n in plan.nodes)
    return ShareResult(action, plan, options, dict(rendered), (), rows, warnings)
