"""The outcome of `kubectl gpu mig apply` as data: the document and the one-line summary.

Owns `document` (what schemas/mig-apply-result.v1.json describes) and `summary` (the line on
stderr). Must not decide outcomes (`apply` does) nor print.
"""

from __future__ import annotations

from typing import Any

from kubectl_gpu.keys import API_VERSION as API_VERSION  # one definition, in keys
from kubectl_gpu.mig import verdicts
from kubectl_gpu.workflows.mig.results import ApplyResult, NodeResult


def document(result: ApplyResult) -> dict[str, Any]:
    """`kind: MigApplyResult`."""
    request = result.request
    return {
        "apiVersion": API_VERSION,
        "kind": "MigApplyResult",
        "file": request.file,
        "config": request.config,
        "request": result.key,
        "dryRun": request.dry_run,
        "force": request.force,
        "wait": request.wait,
        "written": result.written,
        "succeeded": not result.failed,
        "nodes": [_node(n) for n in result.nodes],
        "preview": result.preview.to_dict() if result.preview else None,
    }


def _node(row: NodeResult) -> dict[str, Any]:
    return {
        "node": row.node,
        "actuator": row.actuator.value,
        "gpus": row.gpus,
        "result": row.result,
        "reason": row.reason or None,
        "request": row.request,
        "resources": dict(row.resources),
        "seconds": row.seconds,
        "layout": dict(row.layout),
        "validation": verdicts.to_dict(row.verdict) if row.verdict else None,
    }


def summary(result: ApplyResult) -> str:
    """`config X (request): 2 success, 1 failed; nothing was written` and the like."""
    counts: dict[str, int] = {}
    for row in result.nodes:
        counts[row.result] = counts.get(row.result, 0) + 1
    outcome = ", ".join(f"{n} {r}" for r, n in sorted(counts.items()))
    line = f"config {result.request.config} ({result.key}): {outcome}"
    if result.request.dry_run != "none":
        return line + f"; dry run ({result.request.dry_run}): nothing was written"
    if not result.written:
        return line + "; nothing was written (fix the nodes above, or leave them out)"
    if not result.request.wait and not result.failed:
        return line + "; kubectl gpu mig status shows progress"
    return line
