"""Where each GPU node's MIG layout stands, as its actuator reports it on the Node.

Owns `NodeStatus` (desired, applied, state, phase, reason and each GPU's layout) read from a
node's labels and annotations: our agent's `kubectl-gpu.io/mig.*` keys, or for a node the GPU
Operator's MIG manager drives, `nvidia.com/mig.config` and `nvidia.com/mig.config.state`; and
the document `schemas/mig-status.v1.json` describes. Must not write anything.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import Any

from kubectl_gpu import cluster, keys, numbers
from kubectl_gpu.keys import API_VERSION as API_VERSION  # one definition, in keys
from kubectl_gpu.mig import stuck
from kubectl_gpu.mig.actuators import Actuator
from kubectl_gpu.workflows.mig import nodemig, targets
from kubectl_gpu.workflows.mig.targets import NodeFacts, Scope
from kubectl_gpu.workflows.policies import cluster_policies

DONE_STATES = ("success", "failed", "reboot-required")  # our agent's final states
OPERATOR_DONE_STATES = ("success", "failed")  # mig-manager's; `rebooting` goes on after it
WAITING = "waiting"  # shown (never written) while no agent has taken up the desired config


@dataclasses.dataclass(frozen=True)
class GpuStatus:
    """One GPU: its index, product name, PCI ID and current layout text."""

    index: int
    name: str = ""
    pci: str = ""
    layout: str = ""


@dataclasses.dataclass(frozen=True)
class NodeStatus:
    """One node's MIG request and how far its actuator got."""

    node: str
    actuator: Actuator
    desired: str
    applied: str
    state: str
    phase: str
    reason: str
    request: str
    force: str
    gpus: tuple[GpuStatus, ...]
    stuck: tuple[str, ...] = ()  # why the change is stuck (kubectl_gpu.mig.stuck); () if not


def status(
    api: cluster.Api,
    scope: Scope,
    now: dt.datetime | None = None,
    after: dt.timedelta = stuck.DEFAULT_AFTER,
) -> list[NodeStatus]:
    """Every GPU node in scope (all of them when none is named), with why a node is stuck."""
    if not (scope.names or scope.selector):
        scope = Scope(all_nodes=True)
    policies = cluster_policies(api)
    found = targets.read(api, scope, policies)
    reported = nodemig.reported_gpus(api)
    now = now or dt.datetime.now(dt.timezone.utc)
    return [
        dataclasses.replace(
            of(facts),
            stuck=stuck.reasons(nodemig.node_mig(facts, reported, api), now, after),
        )
        for facts in found
    ]


def of(facts: NodeFacts) -> NodeStatus:
    """A node's status from its labels and annotations."""
    labels, notes = facts.labels, facts.annotations
    gpus = _gpus(notes)
    if facts.actuator is Actuator.OPERATOR:
        desired = labels.get(keys.MIG_CONFIG_LABEL, "")
        state = labels.get(keys.MIG_CONFIG_STATE_LABEL, "")
        applied = desired if state == "success" else ""
        reason = notes.get(keys.MIG_REASON_ANNOTATION, "") or _operator_reason(state)
        return NodeStatus(facts.name, facts.actuator, desired, applied, state, "", reason,
                          desired, "", gpus)  # fmt: skip
    desired = labels.get(keys.MIG_DESIRED_LABEL, "")
    request = notes.get(keys.MIG_REQUEST_ANNOTATION, "")
    state = labels.get(keys.MIG_STATE_LABEL, "")
    phase = notes.get(keys.MIG_PHASE_ANNOTATION, "")
    reason = notes.get(keys.MIG_REASON_ANNOTATION, "")
    if desired and request.partition("@")[0] != desired:
        # the state and reason are those of an earlier request: no agent has taken this one
        # yet (none runs, or it is restarting), so nothing about it succeeded or failed
        state, phase = WAITING, ""
        reason = f"no agent has taken up {desired} yet" + (
            f" (the state shown before was that of {request})" if request else ""
        )
    return NodeStatus(
        node=facts.name,
        actuator=facts.actuator,
        desired=desired,
        applied=notes.get(keys.MIG_APPLIED_ANNOTATION, ""),
        state=state,
        phase=phase,
        reason=reason,
        request=request,
        force=notes.get(keys.MIG_FORCE_ANNOTATION, ""),
        gpus=gpus,
    )


def _operator_reason(state: str) -> str:
    if state != "failed":
        return ""
    return "the GPU Operator's MIG manager failed; its pod's log on this node says why"


def _gpus(notes: dict[str, str]) -> tuple[GpuStatus, ...]:
    """The agent's GPU report joined with its layout report (either may be missing)."""
    layout = _json(notes.get(keys.MIG_LAYOUT_ANNOTATION, ""))
    report = _json(notes.get(keys.MIG_GPUS_ANNOTATION, ""))
    found: dict[int, GpuStatus] = {}
    for entry in report if isinstance(report, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("index"), int):
            index = entry["index"]
            found[index] = GpuStatus(index, str(entry.get("name", "")), str(entry.get("pci", "")))
    for index_text, text in (layout if isinstance(layout, dict) else {}).items():
        index = numbers.whole(index_text)
        if index is not None:
            found[index] = dataclasses.replace(found.get(index, GpuStatus(index)), layout=str(text))
    return tuple(found[i] for i in sorted(found))


def _json(text: str) -> Any:
    if not text or len(text) > targets.MAX_REPORT_CHARS:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def to_dict(row: NodeStatus) -> dict[str, Any]:
    """One node of schemas/mig-status.v1.json."""
    return {
        "node": row.node,
        "actuator": row.actuator.value,
        "desired": row.desired or None,
        "applied": row.applied or None,
        "state": row.state or None,
        "phase": row.phase or None,
        "reason": row.reason or None,
        "request": row.request or None,
        "gpus": [dataclasses.asdict(g) for g in row.gpus],
        "stuck": list(row.stuck),
    }


def document(rows: list[NodeStatus]) -> dict[str, Any]:
    """`kind: MigStatus`, as schemas/mig-status.v1.json describes it."""
    nodes = [to_dict(r) for r in rows]
    # `items`, as every list; `nodes` (its first name) stays for v1 readers
    return {"apiVersion": API_VERSION, "kind": "MigStatus", "items": nodes, "nodes": nodes}
