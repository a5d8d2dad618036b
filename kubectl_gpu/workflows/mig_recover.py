"""Finding GPU nodes whose MIG change is stuck, and `kubectl gpu mig recover NODE…`.

Owns the reads behind `mig.stuck` (each GPU node's labels and annotations, and the MIG devices
the agent's GPUNodeReport shows per GPU; a cluster without the report resource has none) and
the recovery write: one merge patch per node that puts the operator's `gpu.deploy.*` labels
back to their previous values, sets the node's MIG state label to `failed`, records the reason
and clears our in-progress annotations, so that neither actuator goes on with the old change
and the device plugin comes back; a drain that stopped before any MIG change (`mig apply
--drain`, `share --drain`) is only undone (uncordoned, its record removed): no MIG failure.
A node that is not stuck is refused unless forced. Must not
decide what counts as stuck (kubectl_gpu.mig.stuck does).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kubectl_gpu import cluster, errors, keys
from kubectl_gpu.gpumap import report
from kubectl_gpu.mig import stuck
from kubectl_gpu.mig.actuators import Actuator
from kubectl_gpu.workflows import mig_silence, mig_targets
from kubectl_gpu.workflows.mig_targets import NodeFacts, Scope

log = logging.getLogger(__name__)
Json = dict[str, Any]
RECOVERED = "recovered by kubectl gpu mig recover"


class NotStuck(errors.GpuError):
    """A node named for recovery shows no stuck MIG change; nothing was written."""


@dataclasses.dataclass(frozen=True)
class Recovery:
    """What `mig recover` did on one node, and what the user does next."""

    node: str
    actuator: Actuator
    reasons: tuple[str, ...]
    restored: Mapping[str, str]  # label -> the value put back
    state_label: str
    next_step: str
    undone: tuple[str, ...] = ()  # what else was put back: the drain record, the cordon


def reported_gpus(api: cluster.Api) -> dict[str, tuple[stuck.ReportedGpu, ...]]:
    """Per node, the GPUs its agent's report shows (nodes without a report left out)."""
    try:
        objects = list(api.list(cluster.path("gpunodereports")))
    except errors.ClusterError as e:
        if e.status not in (403, 404):
            raise
        log.info("MIG devices not compared with agent reports: %s", e.message)
        return {}
    found: dict[str, tuple[stuck.ReportedGpu, ...]] = {}
    for obj in objects:
        try:
            node_report = report.from_dict(obj)
        except report.ReportError:
            continue
        found[node_report.node] = tuple(
            stuck.ReportedGpu(g.index, g.mig_mode == report.MIG_ENABLED, len(g.mig_devices))
            for g in node_report.gpus
            if g.index is not None
        )
    return found


def node_mig(
    facts: NodeFacts,
    reported: Mapping[str, Sequence[stuck.ReportedGpu]],
    api: cluster.Api | None = None,
) -> stuck.NodeMig:
    """The node as kubectl_gpu.mig.stuck judges it; with `api`, a pending node's actuator pod
    is looked for (one read per pending node)."""
    node = stuck.NodeMig(facts.name, facts.labels, facts.annotations, reported.get(facts.name))
    return with_actuator(api, node, facts.actuator)


def with_actuator(
    api: cluster.Api | None, node: stuck.NodeMig, actuator: Actuator
) -> stuck.NodeMig:
    """Who acts on the node, and (with `api`, only while a change is pending) whether its
    pod runs there."""
    operator = actuator is Actuator.OPERATOR
    who = "the GPU Operator's MIG manager" if operator else "the kubectl-gpu agent"
    runs = None
    if api is not None and stuck.pending_label(node.labels):
        selector = mig_silence.MIG_MANAGER_SELECTOR if operator else mig_silence.AGENT_SELECTOR
        runs = _runs_on(api, node.name, selector)
    return dataclasses.replace(node, actuator=who, actuator_runs=runs)


def _runs_on(api: cluster.Api, node: str, selector: str) -> bool | None:
    field = f"spec.nodeName={node}"
    try:
        pods = list(api.list(cluster.path("pods"), label_selector=selector, field_selector=field))
    except errors.ClusterError as e:
        if e.status != 403:
            raise
        return None  # may not read pods: unknown, never "not running"
    return any((p.get("status") or {}).get("phase") == "Running" for p in pods)


def recover(
    api: cluster.Api,
    names: Sequence[str],
    now: dt.datetime,
    after: dt.timedelta = stuck.DEFAULT_AFTER,
    force: bool = False,
) -> list[Recovery]:
    """Recover each named node; NotStuck (before any write) for one that is not stuck."""
    found = mig_targets.read(api, Scope(tuple(names)), mig_targets.cluster_policies(api))
    reported = reported_gpus(api)
    plans = [(facts, stuck.reasons(node_mig(facts, reported, api), now, after)) for facts in found]
    calm = [facts.name for facts, reasons in plans if not reasons]
    if calm and not force:
        raise NotStuck(
            f"no stuck MIG change on {', '.join(calm)}: nothing to recover",
            hint="`kubectl gpu mig status` shows where each node stands; --force recovers "
            "a node anyway (e.g. a change you know has died)",
        )
    done = []
    for facts, reasons in plans:
        subject = node_mig(facts, reported, api)
        # a drain that stopped before any MIG change began leaves the MIG state alone
        touch_mig = bool(stuck.mig_reasons(subject, now, after)) or not reasons
        done.append(_recover(api, facts, reasons or ("recovered with --force",), touch_mig))
    return done


def _recover(
    api: cluster.Api, facts: NodeFacts, reasons: tuple[str, ...], touch_mig: bool
) -> Recovery:
    node = stuck.NodeMig(facts.name, facts.labels, facts.annotations)
    restored = stuck.restored_labels(node)
    state_label = ""
    if touch_mig:
        operator = facts.actuator is Actuator.OPERATOR
        state_label = keys.MIG_CONFIG_STATE_LABEL if operator else keys.MIG_STATE_LABEL
    reason = f"{RECOVERED}: {'; '.join(reasons)}"
    labels: dict[str, str | None] = {**restored, **({state_label: "failed"} if state_label else {})}
    notes: dict[str, str | None] = {}
    if touch_mig:  # the MIG change failed: say why where `mig status` and doctor read it
        notes[keys.MIG_REASON_ANNOTATION] = reason
        notes |= dict.fromkeys(
            (keys.MIG_PHASE_ANNOTATION, keys.MIG_PAUSED_PLUGIN_ANNOTATION,
             keys.MIG_PENDING_SINCE_ANNOTATION)
        )  # fmt: skip
    body: dict[str, Any] = {"metadata": {"labels": labels, "annotations": notes}}
    record = stuck.drain_record(facts.annotations)
    undone: list[str] = []
    if record:  # undo the drain: the node goes back into use
        notes[keys.DRAIN_ANNOTATION] = None
        undone.append(f"drain of {record.get('change', 'a change')} ended")
        if record.get("cordoned"):
            body["spec"] = {"unschedulable": None}
            undone.append("uncordoned")
            if touch_mig:
                notes[keys.MIG_REASON_ANNOTATION] = f"{reason}; uncordoned the node it had cordoned"
    api.patch(cluster.path("nodes", facts.name), body)
    log.info("node %s: %s", facts.name, reason)
    step = _next(facts) if touch_mig else _after_drain(facts.name, record)
    return Recovery(facts.name, facts.actuator, reasons, restored, state_label, step, tuple(undone))


def _after_drain(node: str, record: Mapping[str, object]) -> str:
    change = record.get("change", "the change")
    return (
        f"node {node} is back in use and {change} was not made there; once its pods may go "
        "(a PodDisruptionBudget allows it), run the same command with --drain again"
    )


def _next(facts: NodeFacts) -> str:
    config = facts.labels.get(
        keys.MIG_CONFIG_LABEL if facts.actuator is Actuator.OPERATOR else keys.MIG_DESIRED_LABEL,
        "",
    )
    apply = f"kubectl gpu mig apply -f FILE -c {config or 'CONFIG'} --node {facts.name} --force"
    if facts.actuator is Actuator.OPERATOR:
        return (
            "read why the MIG manager stopped (its pod: kubectl get pods -A -l "
            f"app=nvidia-mig-manager --field-selector spec.nodeName={facts.name}), free the "
            f"GPUs, then re-apply: {apply}"
        )
    return (
        f"read why the agent stopped (its pod's log on {facts.name}), free the GPUs "
        f"(kubectl gpu mig status --node {facts.name} shows each GPU), then re-apply: {apply}"
    )
