"""`kubectl gpu share --drain` and `--force`: what a sharing change does about running pods.

Owns the refusal of a change that takes a resource from running pods without `--drain` or
`--force` (naming them), and the drain around it: every node whose pods the change hits is
cordoned and those pods evicted (workflows.drain: Eviction API, PodDisruptionBudgets, every
step recorded on the Node) before anything is written, because the write alone may restart
the plugin (config-manager reloads a changed key; the GPU Operator rolls its DaemonSet on a
ClusterPolicy change). A refused eviction stops the run there: nothing was written, the nodes
stay cordoned with their step recorded, and running the command again resumes. After the
rollout each drained node whose new capacity showed is uncordoned. Must not plan the change
(sharing.rollout does) nor roll it (`change` does).
"""

from __future__ import annotations

from collections.abc import Mapping

from kubectl_gpu import cluster
from kubectl_gpu.doctor.preview import Preview
from kubectl_gpu.sharing import rollout
from kubectl_gpu.workflows import drain
from kubectl_gpu.workflows.share.options import Options
from kubectl_gpu.workflows.waiting import Timing

CHANGE = "kubectl gpu share"


def refuse_hits(seen: Preview | None, options: Options) -> None:
    """ShareRefused naming the pods (one per line), when the change hits some and nobody said
    what to do, or --drain would evict pods no controller recreates (without --force, as
    `kubectl drain` refuses them). A dry run or diff gives the same verdict as the real run."""
    if seen is None or not seen.hit:
        return
    if not options.drain and not options.force:
        raise rollout.ShareRefused(
            f"running pods would lose their resource; nothing was written ({len(seen.hit)}):",
            hint="evict them first with --drain (PodDisruptionBudgets are honoured), go on "
            "anyway with --force, or see the whole preview with --dry-run --force",
            details=tuple(f"{h.ref}: {h.why}" for h in seen.hit),
        )
    if options.drain:
        found = {n.node: drain.unmanaged(n.node, n.hit, options.force) for n in seen.nodes}
        problems = [f"node {node}: {problem}" for node, problem in found.items() if problem]
        if problems:
            raise rollout.ShareRefused(
                "; ".join(problems) + "; nothing was written, no node was cordoned",
                hint="give them a controller (a Deployment or Job), delete them yourself, or "
                "add --force to evict them for good",
            )


def drained(seen: Preview | None, options: Options) -> dict[str, list[str]]:
    """The nodes --drain empties (node → namespace/name of its pods the change hits)."""
    if seen is None or not options.drain or not _writes(options):
        return {}
    return {n.node: [h.ref for h in n.hit] for n in seen.nodes if n.hit}


def drain_first(api: cluster.Api, seen: Preview | None, options: Options, timing: Timing) -> None:
    """Cordon every hit node and evict its hit pods; DrainBlocked when a budget holds one."""
    hit = drained(seen, options)
    step = drain.Drain(CHANGE, options.drain_timeout, timing)
    for node, pods in hit.items():
        drain.begin(api, node, step, pods)
    try:
        for node, pods in hit.items():
            drain.evict(api, node, step, pods)
    except drain.DrainBlocked as e:
        for node in hit:
            drain.failed(api, node, step, "evicting", e.message)
        raise drain.DrainBlocked(
            f"{e.message}; nothing was written",
            hint=f"the nodes stay cordoned; {e.hint}",
        ) from e
    for node in hit:
        drain.applying(api, node, step)


def give_back(api: cluster.Api, hit: Mapping[str, list[str]], failed: Mapping[str, bool]) -> None:
    """Uncordon each drained node whose rollout went well; record where the others stopped."""
    step = drain.Drain(CHANGE)
    for node in hit:
        if failed.get(node, False):
            why = "its plugin did not come back with the new capacity"
            drain.failed(api, node, step, "applying", why)
        else:
            drain.finish(api, node, step)


def _writes(options: Options) -> bool:
    return not options.previewing and options.dry_run == "none"
