"""`kubectl gpu share --drain`: the plugin restarts of a sharing rollout, with the pods the
change hits evicted first, node batch by node batch.

Owns the refusal of a change that hits running pods without `--drain` or `--force` (naming
them), and the drained roll: per batch of `--max-unavailable` nodes, cordon and evict the hit
pods (workflows.drain: Eviction API, PodDisruptionBudgets, every step recorded on the Node),
restart the plugin, wait until allocatable shows the new capacity, uncordon. A batch that
fails stops the roll; its nodes stay cordoned with their step recorded. Returns the restarts
and readings `share` turns into rows. Must not plan the change (sharing.rollout does).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from kubectl_gpu import cluster
from kubectl_gpu.doctor.preview import Preview
from kubectl_gpu.sharing import rollout
from kubectl_gpu.workflows import capacity, drain, restarts
from kubectl_gpu.workflows.waiting import Timing

if TYPE_CHECKING:
    from kubectl_gpu.workflows.share import Options


def refuse_hits(seen: Preview | None, options: Options) -> None:
    """ShareRefused naming the pods, when the change hits some and nobody said what to do."""
    writes = not options.previewing and options.dry_run == "none"
    if seen is None or not seen.hit or not writes or options.drain or options.force:
        return
    names = ", ".join(f"{h.ref} ({h.why})" for h in seen.hit)
    raise rollout.ShareRefused(
        f"running pods would lose their resource: {names}; nothing was written",
        hint="evict them first with --drain (PodDisruptionBudgets are honoured), go on "
        "anyway with --force, or see the whole preview with --dry-run",
    )


@dataclasses.dataclass(frozen=True)
class _Roll:
    api: cluster.Api
    plan: rollout.Plan
    options: Options
    hit: dict[str, list[str]]  # node -> namespace/name of the pods the change hits
    step: drain.Drain


def roll(
    api: cluster.Api, plan: rollout.Plan, options: Options, seen: Preview, timing: Timing
) -> tuple[dict[str, restarts.Restart], dict[str, capacity.Reading]]:
    """Restart the plugin batch by batch, each batch drained first and given back after."""
    hit = {n.node: [h.ref for h in n.hit] for n in seen.nodes if n.hit}
    change = f"share ({plan.namespace}/{plan.configmap})"
    job = _Roll(api, plan, options, hit, drain.Drain(change, options.drain_timeout, timing))
    size = max(options.max_unavailable, 1)
    order = [n.node for n in plan.restarts]
    restarted: dict[str, restarts.Restart] = {}
    readings: dict[str, capacity.Reading] = {}
    for start in range(0, len(order), size):
        done, read = _batch(job, order[start : start + size])
        restarted |= done
        readings |= read
        if not all(r.ok for r in done.values()) or not all(x.matched for x in read.values()):
            for node in order[start + size :]:
                why = "not restarted: an earlier batch failed (its nodes stay cordoned)"
                restarted[node] = restarts.Restart(node, "", "skipped", message=why)
            break
    return restarted, readings


def _batch(
    job: _Roll, batch: list[str]
) -> tuple[dict[str, restarts.Restart], dict[str, capacity.Reading]]:
    api, step = job.api, job.step
    drained = [n for n in batch if n in job.hit]
    try:
        for node in drained:
            drain.begin(api, node, step, job.hit[node])
        for node in drained:
            drain.evict(api, node, step, job.hit[node])
    except drain.DrainBlocked as e:
        for node in drained:
            drain.failed(api, node, step, "evicting", e.message)
        message = f"{e.message}; {e.hint}"
        return {n: restarts.Restart(n, "", "failed", message=message) for n in batch}, {}
    for node in drained:
        drain.applying(api, node, step)
    limits = (len(batch), job.options.timeout)
    by_node = {
        r.node: r for r in restarts.roll(api, job.plan.deployment, batch, limits, step.timing)
    }
    alive = [n for n in job.plan.restarts if n.node in batch and by_node[n.node].ok]
    read = capacity.wait(api, alive, job.options.timeout, step.timing)
    for node in drained:
        reading = read.get(node)
        if by_node[node].ok and reading is not None and reading.matched:
            drain.finish(api, node)
        else:
            why = by_node[node].message or "the new capacity did not show"
            drain.failed(api, node, step, "applying", why)
    return by_node, read
