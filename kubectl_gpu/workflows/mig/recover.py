"""`kubectl gpu mig recover NODE…`: bring back a node whose MIG change is stuck.

Owns the recovery write (whether a node is stuck is read through `nodemig`): one merge patch
per node that puts the operator's `gpu.deploy.*` labels back to their previous values, sets the
node's MIG state label to `failed`, records the reason and clears our in-progress annotations,
so that neither actuator goes on with the old change and the device plugin comes back; a drain
that stopped before any MIG change (`mig apply --drain`, `share --drain`) is only undone
(uncordoned, its record removed): no MIG failure. A node that is not stuck is refused unless
forced; a node whose device plugin its DaemonSet would not bring back (an untolerated taint:
`workflows.comeback`) is refused before any write. Must not decide what counts as stuck
(kubectl_gpu.mig.stuck does).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kubectl_gpu import cluster, errors, keys
from kubectl_gpu.mig import stuck
from kubectl_gpu.mig.actuators import Actuator
from kubectl_gpu.workflows import comeback
from kubectl_gpu.workflows.mig import nodemig, targets
from kubectl_gpu.workflows.mig.targets import NodeFacts, Scope
from kubectl_gpu.workflows.policies import cluster_policies

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


def recover(
    api: cluster.Api,
    names: Sequence[str],
    now: dt.datetime,
    after: dt.timedelta = stuck.DEFAULT_AFTER,
    force: bool = False,
) -> list[Recovery]:
    """Recover each named node; NotStuck (before any write) for one that is not stuck."""
    policies = cluster_policies(api)
    found = targets.read(api, Scope(tuple(names)), policies)
    reported = nodemig.reported_gpus(api)
    plans = [
        (facts, stuck.reasons(nodemig.node_mig(facts, reported, api), now, after))
        for facts in found
    ]
    calm = [facts.name for facts, reasons in plans if not reasons]
    if calm and not force:
        raise NotStuck(
            f"no stuck MIG change on {', '.join(calm)}: nothing to recover",
            hint="`kubectl gpu mig status` shows where each node stands; --force recovers "
            "a node anyway (e.g. a change you know has died)",
        )
    touched = []
    for facts, reasons in plans:
        subject = nodemig.node_mig(facts, reported, api)
        # a drain that stopped before any MIG change began leaves the MIG state alone
        touched.append(bool(stuck.mig_reasons(subject, now, after)) or not reasons)
    _refuse_no_comeback(api, policies, [f for (f, _), t in zip(plans, touched, strict=True) if t])
    return [
        _recover(api, facts, reasons or ("recovered with --force",), touch_mig)
        for (facts, reasons), touch_mig in zip(plans, touched, strict=True)
    ]


def _refuse_no_comeback(api: cluster.Api, policies: list[Json], found: list[NodeFacts]) -> None:
    """Before any write: the device plugin these nodes get back (their deploy labels put
    back) must be one its DaemonSet brings back there; else the node would stay without GPUs
    with its MIG change called over."""
    after = {
        f.name: restored
        for f in found
        if (restored := stuck.restored_labels(stuck.NodeMig(f.name, f.labels, f.annotations)))
    }  # a node with nothing paused gets no pod back from this recovery
    if not after:
        return
    raw = comeback.raw_nodes(api, list(after))
    deployment = comeback.detected(api, policies)
    comeback.check(api, deployment, raw, "bringing the device plugin back", dict(after))


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
