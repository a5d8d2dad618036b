"""`kubectl gpu mig apply`: check a MIG config offline against each node, then hand it over.

Owns the flow of the issue's CLI half: resolve the GPU nodes (`mig_targets`), check the config
against each node's GPUs (the agent's report, else GFD labels) and the MIG strategy of the
device plugin serving it (`mig_strategy`), refuse a node where the other MIG actuator already
acts, pods would lose their GPUs (without --drain or --force), a --drain or --wait nothing
would follow (no actuator pod on the node) or a --drain would evict pods no controller
recreates, all before anything is written or cordoned (nothing is written when any node fails;
a dry run gives the same verdict); then store the config and set the request label
(`mig_store`): ours (`kubectl-gpu.io/mig.config`, with `kubectl-gpu.io/mig.force` for --force)
or, where the GPU Operator's MIG manager manages the node, the operator's ConfigMap and
`nvidia.com/mig.config`; with `wait`, poll each node until its actuator reports a final state.
An interruption is explained by `mig_stop`. Progress goes to the `kubectl_gpu.workflows` log
(stderr). Must not render nor talk to NVML.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from kubectl_gpu import cluster, keys
from kubectl_gpu.doctor.preview import Preview
from kubectl_gpu.errors import GpuError
from kubectl_gpu.mig import actuators, apply, verdicts
from kubectl_gpu.mig.actuators import Actuator
from kubectl_gpu.mig.spec import MigConfigFile, MigDeviceSpec
from kubectl_gpu.mig.verdicts import ConfigVerdict
from kubectl_gpu.workflows import (
    drain,
    mig_silence,
    mig_status,
    mig_stop,
    mig_store,
    mig_strategy,
    mig_targets,
    preview,
)
from kubectl_gpu.workflows.mig_strategy import Served
from kubectl_gpu.workflows.mig_targets import NodeFacts, Scope
from kubectl_gpu.workflows.progress import Progress
from kubectl_gpu.workflows.waiting import Deadline, Timing

log = logging.getLogger(__name__)
Json = dict[str, Any]
OFFLINE_FAILURES = ("does-not-fit", "unknown-gpus", "refused")
OK_RESULTS = ("success", "requested", "would-apply")
_OPERATOR_APPS = ("nvidia-device-plugin-daemonset", "gpu-feature-discovery", "nvidia-mig-manager")


@dataclasses.dataclass(frozen=True)
class ApplyRequest:
    """What the user asked: a config (by name, from a parsed file) for some nodes."""

    file: str  # as given (-f), for messages
    document: Json  # the parsed mig-parted file
    config: str
    scope: Scope
    dry_run: str = "none"  # none | client | server
    force: bool = False
    wait: bool = False
    timeout: float = 300.0
    namespace: str | None = None  # -n: our namespace, or the operator's
    drain: bool = False  # evict the pods the change hits first (workflows.drain)
    drain_timeout: float = 300.0  # how long an eviction may keep being refused, per node
    max_unavailable: int = 1  # nodes drained at once
    timing: Timing | None = None  # tests: a quicker poll


@dataclasses.dataclass
class NodeResult:
    """One node's outcome."""

    node: str
    actuator: Actuator
    gpus: str
    result: str
    reason: str = ""
    request: str = ""
    resources: dict[str, int] = dataclasses.field(default_factory=dict)
    seconds: float | None = None
    layout: dict[str, str] = dataclasses.field(default_factory=dict)
    verdict: ConfigVerdict | None = None

    @property
    def failed(self) -> bool:
        return self.result not in OK_RESULTS


@dataclasses.dataclass
class ApplyResult:
    """Every node's outcome, and the objects written (or that a dry run would write)."""

    request: ApplyRequest
    key: str
    nodes: list[NodeResult]
    objects: list[Json]
    written: bool
    preview: Preview | None = None  # who the change hits, capacity before → after

    @property
    def failed(self) -> bool:
        return any(n.failed for n in self.nodes)


def run(api: cluster.Api, request: ApplyRequest, timing: Timing | None = None) -> ApplyResult:
    """Check offline, write, and (with `wait`) wait; see the module docstring. Interrupted
    (Ctrl-C, SIGTERM, SIGHUP), the error says what was written and how to finish or undo."""
    read: list[NodeFacts] = []
    try:
        return _run(api, request, timing, read)
    except KeyboardInterrupt as e:
        raise mig_stop.interrupted(api, request, read, e) from e


def _run(
    api: cluster.Api, request: ApplyRequest, timing: Timing | None, read: list[NodeFacts]
) -> ApplyResult:
    specs = MigConfigFile.from_dict(request.document).select(request.config)
    raw = request.document["mig-configs"][request.config]
    text = mig_store.document_text(request.config, raw)
    key = apply.request_key(request.config, text)
    policies = mig_targets.cluster_policies(api)
    facts = mig_targets.read(api, request.scope, policies)
    read.extend(facts)
    served = mig_strategy.read(api, {f.name: f.labels for f in facts})
    rows = [_check(f, (request.config, specs, key), served[f.name]) for f in facts]
    if any(r.result in OFFLINE_FAILURES for r in rows):
        return ApplyResult(request, key, rows, [], written=False)
    seen = _preview(api, rows)
    if _refuse_hits(request, rows, seen) or _refuse_unready(api, request, rows, seen):
        return ApplyResult(request, key, rows, [], written=False, preview=seen)
    _warn_unready(api, request, rows)
    hit = {n.node: [h.ref for h in n.hit] for n in seen.nodes if n.hit}
    if request.drain and request.dry_run == "none" and hit:
        job = _Job(request, facts, rows, hit, (text, key, raw))
        return _drained(api, job, policies, seen)
    objects = _write(api, request, facts, (text, key, raw), policies)
    done = request.dry_run != "none"
    for row in rows:
        row.result = "would-apply" if done else "requested"
    if request.wait and not done:
        _wait(api, request, rows, key, timing or Timing())
    return ApplyResult(request, key, rows, objects, written=not done, preview=seen)


@dataclasses.dataclass(frozen=True)
class _Job:
    """A checked change, ready to write: the nodes, their rows, the pods it hits per node."""

    request: ApplyRequest
    facts: list[NodeFacts]
    rows: list[NodeResult]
    hit: dict[str, list[str]]
    content: tuple[str, str, list[Any]]  # text, request key, raw config


def _drained(api: cluster.Api, job: _Job, policies: list[Json], seen: Preview) -> ApplyResult:
    """--drain: the nodes nobody uses are asked at once; the others, `max_unavailable` at a
    time: cordon, evict, ask, wait for the new layout, uncordon. The first batch that fails
    stops the run (its nodes stay cordoned, their step recorded)."""
    request, key = job.request, job.content[1]
    timing = request.timing or Timing()
    objects = _store(api, request, job.facts, job.content, policies)
    free = [f for f in job.facts if f.name not in job.hit]
    by_node = {r.node: r for r in job.rows}
    for facts in free:
        objects.append(_request(api, facts, request, key))
        by_node[facts.name].result = "requested"
    if request.wait:
        _wait(api, request, [by_node[f.name] for f in free], key, timing)
    busy = [f for f in job.facts if f.name in job.hit]
    step = drain.Drain(f"mig apply {key}", request.drain_timeout, timing)
    size = max(request.max_unavailable, 1)
    for start in range(0, len(busy), size):
        batch = busy[start : start + size]
        if not _drain_batch(api, job, batch, [by_node[f.name] for f in batch], step):
            break
    for row in job.rows:
        if row.result == "checked":
            row.result, row.reason = "not-started", "an earlier node failed; run again to go on"
    return ApplyResult(request, key, job.rows, objects, written=True, preview=seen)


def _drain_batch(
    api: cluster.Api, job: _Job, batch: list[NodeFacts], rows: list[NodeResult], step: drain.Drain
) -> bool:
    """One batch through every step; False when a node did not make it."""
    request, key, hit = job.request, job.content[1], job.hit
    try:
        for facts in batch:
            drain.begin(api, facts.name, step, hit[facts.name])
        for facts in batch:
            drain.evict(api, facts.name, step, hit[facts.name])
    except drain.DrainBlocked as e:
        for row in rows:
            row.result, row.reason = "drain-blocked", f"{e.message}; {e.hint}"
            drain.failed(api, row.node, step, "evicting", e.message)
        return False
    for facts in batch:
        drain.applying(api, facts.name, step)
        _request(api, facts, request, key)
    for row in rows:
        row.result = "requested"
    _wait(api, request, rows, key, step.timing)
    ok = True
    for row in rows:
        if row.result == "success":
            drain.finish(api, row.node)
        else:
            ok = False
            drain.failed(api, row.node, step, "applying", row.reason or row.result)
            row.reason = (
                f"{row.reason}; the node stays cordoned (`kubectl gpu mig recover {row.node} "
                "--force` undoes the drain)"
            )
    return ok


def _request(api: cluster.Api, facts: NodeFacts, request: ApplyRequest, key: str) -> Json:
    if facts.actuator is Actuator.OPERATOR:
        return _request_operator(api, facts, request)
    return _request_ours(api, facts, request, key)


def _preview(api: cluster.Api, rows: list[NodeResult]) -> Preview:
    known = preview.read(api)
    changes = [preview.mig_change(r.node, r.verdict, known) for r in rows if r.verdict]
    return preview.make(changes, known)


def _refuse_hits(request: ApplyRequest, rows: list[NodeResult], seen: Preview) -> bool:
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


def _refuse_unready(
    api: cluster.Api, request: ApplyRequest, rows: list[NodeResult], seen: Preview
) -> bool:
    """Before the first write or cordon: a --drain would empty a node that nothing will then
    change (no Running agent or MIG manager pod there), or evict pods no controller recreates
    (refused without --force, as `kubectl drain` does); a --wait would wait for an actuator
    that is not there. Refuses every such node, naming why."""
    hits = {n.node: n.hit for n in seen.nodes if n.hit}
    refused = False
    for row in rows:
        drained = request.drain and row.node in hits
        problems = []
        if drained or request.wait:
            problems.append(mig_silence.will_not_act(api, row.node, row.actuator, running=drained))
        if drained:
            problems.append(drain.unmanaged(row.node, hits[row.node], request.force))
        problems = [p for p in problems if p]
        if problems:
            row.result, row.reason = "refused", "; ".join(problems)
            refused = True
    return refused


def _warn_unready(api: cluster.Api, request: ApplyRequest, rows: list[NodeResult]) -> None:
    """Without --wait the request may wait for an actuator to come: say so."""
    if request.wait:
        return
    for row in rows:
        problem = mig_silence.will_not_act(api, row.node, row.actuator, running=False)
        if problem:
            log.warning("node %s: %s; the request waits on the node until one does", row.node,
                        problem)  # fmt: skip


def _check(
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


def _write(
    api: cluster.Api,
    request: ApplyRequest,
    facts: list[NodeFacts],
    content: tuple[str, str, list[Any]],
    policies: list[Json],
) -> list[Json]:
    """ConfigMaps first (a refusal there leaves every node untouched), then the labels."""
    stored = _store(api, request, facts, content, policies)
    return stored + [_request(api, f, request, content[1]) for f in facts]


def _store(
    api: cluster.Api,
    request: ApplyRequest,
    facts: list[NodeFacts],
    content: tuple[str, str, list[Any]],
    policies: list[Json],
) -> list[Json]:
    """The config where each of these nodes' actuators reads it."""
    text, _, raw = content
    written: list[Json | None] = []
    if any(f.actuator is Actuator.AGENT for f in facts):
        namespace = request.namespace or keys.NAMESPACE
        written.append(mig_store.store_ours(api, namespace, request.config, text, request.dry_run))
    if any(f.actuator is Actuator.OPERATOR for f in facts):
        namespace = request.namespace or _operator_namespace(api)
        name = mig_store.operator_configmap(policies)
        edit = mig_store.operator_edit(request.config, raw, f"ConfigMap {namespace}/{name}")
        written.append(mig_store.update_configmap(api, namespace, name, edit, request.dry_run))
        if request.force:
            log.warning(
                "--force applies to kubectl gpu's agent only; the MIG manager has no such check"
            )
    return [o for o in written if o is not None]


def _request_ours(api: cluster.Api, facts: NodeFacts, request: ApplyRequest, key: str) -> Json:
    notes: dict[str, str | None] = {keys.MIG_FORCE_ANNOTATION: key} if request.force else {}
    labels: dict[str, str | None] = {keys.MIG_DESIRED_LABEL: request.config}
    log.info("node %s: asking kubectl gpu's agent for %s", facts.name, key)
    return mig_store.label_node(api, facts.name, labels, notes, request.dry_run)


def _request_operator(api: cluster.Api, facts: NodeFacts, request: ApplyRequest) -> Json:
    """The MIG manager acts on a *change* of its label: the same name again goes through ""
    first (mig-parted#108); the old state label goes, so that a wait sees the new one."""
    if facts.labels.get(keys.MIG_CONFIG_LABEL) == request.config:
        mig_store.label_node(api, facts.name, {keys.MIG_CONFIG_LABEL: ""}, {}, request.dry_run)
    labels: dict[str, str | None] = {
        keys.MIG_CONFIG_LABEL: request.config,
        keys.MIG_CONFIG_STATE_LABEL: None,
    }
    log.info("node %s: asking the GPU Operator's MIG manager for %s", facts.name, request.config)
    return mig_store.label_node(api, facts.name, labels, {}, request.dry_run)


def _operator_namespace(api: cluster.Api) -> str:
    for daemonset in api.list(cluster.path("daemonsets")):
        meta = daemonset.get("metadata") or {}
        template = ((daemonset.get("spec") or {}).get("template") or {}).get("metadata") or {}
        apps = {(meta.get("labels") or {}).get("app"), (template.get("labels") or {}).get("app")}
        if apps & set(_OPERATOR_APPS):
            return str(meta.get("namespace", ""))
    raise GpuError(
        "cannot find the GPU Operator's namespace (no device plugin or GFD DaemonSet of it)",
        hint="name the operator's namespace with -n",
    )


# --- waiting ---------------------------------------------------------------------------------


def _wait(
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
                row.reason = mig_silence.reason(api, row.node, row.actuator, last, request.timeout)
            return
        if waiting:
            deadline.pause()


def _look(
    api: cluster.Api, request: ApplyRequest, row: NodeResult, deadline: Deadline,
    progress: Progress,
) -> bool:  # fmt: skip
    """Read one node; True when its actuator reached a final state for our request."""
    facts = mig_targets.read(api, Scope(names=(row.node,)), [])[0]
    now = mig_status.of(dataclasses.replace(facts, actuator=row.actuator))
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


def _final(now: mig_status.NodeStatus, row: NodeResult, request: ApplyRequest) -> bool:
    if row.actuator is Actuator.OPERATOR:
        return now.desired == request.config and now.state in mig_status.OPERATOR_DONE_STATES
    if request.force and now.force == row.request:
        return False  # the agent has not taken up the forced attempt yet
    return now.request == row.request and now.state in mig_status.DONE_STATES
