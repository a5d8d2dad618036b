"""`kubectl gpu mig apply`: check a MIG config offline against each node, then hand it over.

Owns the flow of the issue's CLI half: resolve the GPU nodes (`targets`), check the config
against each node's GPUs (the agent's report, else GFD labels) and the MIG strategy of the
device plugin serving it (`strategy`), refuse a node where the other MIG actuator already acts,
pods would lose their GPUs (without --drain or --force), a --drain or --wait nothing would
follow (no actuator pod on the node), a --drain would evict pods no controller recreates, or
the paused device plugin would not come back (an untolerated taint: `workflows.comeback`), each
in `checks`, all before anything is written or cordoned (nothing is written when any node
fails; a dry run gives the same verdict); then store the config and set the request label
(`store`): ours (`kubectl-gpu.io/mig.config`, with `kubectl-gpu.io/mig.force` for --force) or,
where the GPU Operator's MIG manager manages the node, the operator's ConfigMap and
`nvidia.com/mig.config`; with `wait`, poll each node until its actuator reports a final state
(`waits`). With --drain, the nodes the change hits go through it a batch at a time. An
interruption is explained by `stop`. Progress goes to the `kubectl_gpu.workflows` log (stderr).
Must not render nor talk to NVML.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kubectl_gpu import cluster
from kubectl_gpu.doctor.preview import Preview
from kubectl_gpu.mig import apply
from kubectl_gpu.mig.spec import MigConfigFile
from kubectl_gpu.workflows import drain
from kubectl_gpu.workflows.mig import checks, stop, store, strategy, targets, waits
from kubectl_gpu.workflows.mig.request import ApplyRequest
from kubectl_gpu.workflows.mig.results import OFFLINE_FAILURES, ApplyResult, NodeResult
from kubectl_gpu.workflows.mig.targets import NodeFacts
from kubectl_gpu.workflows.policies import cluster_policies
from kubectl_gpu.workflows.progress import Batches
from kubectl_gpu.workflows.waiting import Timing

WAITED_FOR = "the MIG actuator to report the new layout"  # each node's own progress follows

Json = dict[str, Any]


def run(api: cluster.Api, request: ApplyRequest, timing: Timing | None = None) -> ApplyResult:
    """Check offline, write, and (with `wait`) wait; see the module docstring. Interrupted
    (Ctrl-C, SIGTERM, SIGHUP), the error says what was written and how to finish or undo."""
    read: list[NodeFacts] = []
    try:
        return _run(api, request, timing, read)
    except KeyboardInterrupt as e:
        raise stop.interrupted(api, request, read, e) from e


def _run(
    api: cluster.Api, request: ApplyRequest, timing: Timing | None, read: list[NodeFacts]
) -> ApplyResult:
    specs = MigConfigFile.from_dict(request.document).select(request.config)
    raw = request.document["mig-configs"][request.config]
    text = store.document_text(request.config, raw)
    key = apply.request_key(request.config, text)
    policies = cluster_policies(api)
    facts = targets.read(api, request.scope, policies)
    read.extend(facts)
    served = strategy.read(api, {f.name: f.labels for f in facts})
    rows = [checks.check(f, (request.config, specs, key), served[f.name]) for f in facts]
    if any(r.result in OFFLINE_FAILURES for r in rows):
        return ApplyResult(request, key, rows, [], written=False)
    seen = checks.preview_changes(api, rows)
    if (
        checks.refuse_no_comeback(api, rows, policies)
        or checks.refuse_hits(request, rows, seen)
        or checks.refuse_unready(api, request, rows, seen)
    ):
        return ApplyResult(request, key, rows, [], written=False, preview=seen)
    hit = {n.node: [h.ref for h in n.hit] for n in seen.nodes if n.hit}
    if request.drain and request.dry_run == "none" and hit:
        job = _Job(request, facts, rows, hit, (text, key, raw))
        return _drained(api, job, policies, seen)
    objects = _write(api, request, facts, (text, key, raw), policies)
    done = request.dry_run != "none"
    for row in rows:
        row.result = "would-apply" if done else "requested"
    if request.wait and not done:
        waits.wait(api, request, rows, key, timing or Timing())
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
    objects = store.put(api, request, job.facts, job.content, policies)
    free = [f for f in job.facts if f.name not in job.hit]
    by_node = {r.node: r for r in job.rows}
    for facts in free:
        objects.append(store.ask(api, facts, request, key))
        by_node[facts.name].result = "requested"
    if request.wait:
        waits.wait(api, request, [by_node[f.name] for f in free], key, timing)
    busy = [f for f in job.facts if f.name in job.hit]
    step = drain.Drain(f"mig apply {key}", request.drain_timeout, timing)
    size = max(request.max_unavailable, 1)
    progress = Batches(len(busy), size, timing)
    for start in range(0, len(busy), size):
        batch = busy[start : start + size]
        progress.begin("draining and changing the MIG layout", [f.name for f in batch])
        ok = _drain_batch(api, job, batch, step, progress)
        done = sum(by_node[f.name].result == "success" for f in batch)
        progress.end(done)
        if not ok:
            break
    for row in job.rows:
        if row.result == "checked":
            row.result, row.reason = "not-started", "an earlier node failed; run again to go on"
    return ApplyResult(request, key, job.rows, objects, written=True, preview=seen)


def _drain_batch(
    api: cluster.Api, job: _Job, batch: list[NodeFacts], step: drain.Drain, progress: Batches
) -> bool:
    """One batch through every step; False when a node did not make it."""
    request, key, hit = job.request, job.content[1], job.hit
    by_node = {r.node: r for r in job.rows}
    rows = [by_node[f.name] for f in batch]
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
        store.ask(api, facts, request, key)
    for row in rows:
        row.result = "requested"
    progress.waiting(WAITED_FOR, [r.node for r in rows])
    waits.wait(api, request, rows, key, step.timing)
    ok = True
    for row in rows:
        if row.result == "success":
            drain.finish(api, row.node, step)
        else:
            ok = False
            drain.failed(api, row.node, step, "applying", row.reason or row.result)
            row.reason = (
                f"{row.reason}; the node stays cordoned (`kubectl gpu mig recover {row.node} "
                "--force` undoes the drain)"
            )
    return ok


def _write(
    api: cluster.Api,
    request: ApplyRequest,
    facts: list[NodeFacts],
    content: tuple[str, str, list[Any]],
    policies: list[Json],
) -> list[Json]:
    """ConfigMaps first (a refusal there leaves every node untouched), then the labels."""
    stored = store.put(api, request, facts, content, policies)
    return stored + [store.ask(api, f, request, content[1]) for f in facts]
