"""What `kubectl gpu mig apply` checks before its first write or cordon.

Owns the offline check of each node (its GPUs known, no rival MIG actuator on it, the config
fits its GPUs and the device plugin's MIG strategy can advertise the result), the preview of
who the change hits, and the refusals: pods that would lose their GPUs without --drain or
--force, a --drain or --wait that no actuator pod would follow, a --drain that would evict pods
no controller recreates, a device plugin (or GFD, MIG manager) the change pauses that its
DaemonSet would not bring back (`workflows.comeback`). A refused node gets its row's result and
reason; nothing is written here. Must not write nor decide whether a config fits (mig.verdicts
does).
"""

from __future__ import annotations

from typing import Any

from kubectl_gpu import cluster
from kubectl_gpu.doctor.preview import Preview
from kubectl_gpu.mig import actuators, verdicts
from kubectl_gpu.mig.actuators import Actuator
from kubectl_gpu.mig.spec import MigDeviceSpec
from kubectl_gpu.mig.verdicts import ConfigVerdict
from kubectl_gpu.workflows import comeback, drain, preview
from kubectl_gpu.workflows.mig import silence
from kubectl_gpu.workflows.mig.request import ApplyRequest
from kubectl_gpu.workflows.mig.results import NodeResult
from kubectl_gpu.workflows.mig.strategy import Served
from kubectl_gpu.workflows.mig.targets import NodeFacts

Json = dict[str, Any]


def preview_changes(api: cluster.Api, rows: list[NodeResult]) -> Preview:
    """Who the change hits on each node that passed the offline check, capacity before → after."""
    known = preview.read(api)
    changes = [preview.mig_change(r.node, r.verdict, known) for r in rows if r.verdict]
    return preview.make(changes, known)


def refuse_hits(request: ApplyRequest, rows: list[NodeResult], seen: Preview) -> bool:
    """Pods would lose their devices and nobody said what to do about them: refuse, naming
    them (a dry run gives the same verdict, and shows the whole preview too)."""
    if request.force or request.drain or not seen.hit:
        return False
    hit = {n.node: n.hit for n in seen.nodes if n.hit}
    for row in rows:
        if row.node in hit:
            names = ", ".join(h.ref for h in hit[row.node])
            row.result = "refused"
            row.reason = (
                f"pods would lose their GPUs: {names}; evict them first with --drain, or "
                "change the GPUs under them with --force"
            )
    return True


def refuse_unready(
    api: cluster.Api, request: ApplyRequest, rows: list[NodeResult], seen: Preview
) -> bool:
    """Before the first write or cordon: no agent or MIG manager pod on a node, so nothing
    would ever act on the request (it would wait there, unseen, until one is installed and
    then change the GPUs at a moment nobody chose); a --drain would empty a node whose actuator
    is not Running, or evict pods no controller recreates (refused without --force, as
    `kubectl drain` does). Refuses every such node, naming why."""
    hits = {n.node: n.hit for n in seen.nodes if n.hit}
    pods = {a: silence.actuator_pods(api, a) for a in {r.actuator for r in rows}}
    refused = False
    for row in rows:
        drained = request.drain and row.node in hits
        problems = [silence.will_not_act(row.node, row.actuator, pods[row.actuator],
                                         running=drained)]  # fmt: skip
        if drained:
            problems.append(drain.unmanaged(row.node, hits[row.node], request.force))
        problems = [p for p in problems if p]
        if problems:
            row.result, row.reason = "refused", "; ".join(problems)
            refused = True
    return refused


def refuse_no_comeback(api: cluster.Api, rows: list[NodeResult], policies: list[Json]) -> bool:
    """Before the first write or cordon: the change pauses or restarts the device plugin (and
    the MIG manager, GFD) on each node; refuse every node where their DaemonSets would not
    bring the pods back (an untolerated taint, a selector that no longer matches)."""
    names = [r.node for r in rows if r.verdict is not None]
    if not names:
        return False
    deployment = comeback.detected(api, policies)
    found = comeback.blockers(comeback.stack(api, deployment), comeback.raw_nodes(api, names))
    reasons = comeback.per_node(found)
    for row in rows:
        if row.node in reasons:
            row.result, row.reason = "refused", reasons[row.node]
    return bool(reasons)


def check(
    facts: NodeFacts, asked: tuple[str, tuple[MigDeviceSpec, ...], str], served: Served
) -> NodeResult:
    """One node checked offline: its GPUs known, no rival actuator, the config fits them and
    the device plugin that serves the node (its MIG strategy) can advertise the result."""
    config, specs, key = asked
    request = config if facts.actuator is Actuator.OPERATOR else key
    row = NodeResult(facts.name, facts.actuator, _gpus_text(facts), "checked", request=request)
    rival = actuators.rival_label(facts.actuator, facts.labels)
    if facts.target is None:
        row.result, row.reason = "unknown-gpus", facts.problem
    elif rival:
        row.result, row.reason = "refused", _rival_reason(facts, rival)
    else:
        verdict = verdicts.check(config, specs, facts.target, served.strategy)
        row.verdict, row.resources = verdict, verdict.resources
        if not verdict.fits:
            row.result, row.reason = "does-not-fit", _misfit(verdict)
        if verdict.problems:
            row.reason += " " + served.explain()
    return row


def _rival_reason(facts: NodeFacts, rival: str) -> str:
    other = "kubectl gpu's agent" if facts.actuator is Actuator.OPERATOR else "a MIG manager"
    mine = (
        "the GPU Operator's MIG manager manages it"
        if facts.actuator is Actuator.OPERATOR
        else "kubectl gpu's agent manages it"
    )
    return (
        f"{mine}, but it has {rival}={facts.labels[rival]}, so {other} acts on it too; "
        f"remove that label first: kubectl label node {facts.name} {rival}-"
    )


def _misfit(verdict: ConfigVerdict) -> str:
    for gpu in verdict.gpus:
        if gpu.status.value not in ("fits", "skipped"):
            return f"GPU {gpu.gpu.index}: {gpu.problem or gpu.status.value}"
    return "; ".join(verdict.problems)


def _gpus_text(facts: NodeFacts) -> str:
    if facts.target is None:
        return ""
    names = [g.model.key if g.model else g.name for g in facts.target.gpus]
    counts = {n: names.count(n) for n in dict.fromkeys(names)}
    return ",".join(f"{count}x {name}" for name, count in counts.items())
