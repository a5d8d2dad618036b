"""`kubectl gpu share`, `share off` and `share rollback`, end to end.

Owns the order of a sharing rollout: read (`state`), plan (the domain's rollout planner,
which refuses a hand edit it would overwrite), refuse what cannot go well (pods hit, a --drain
or --wait that cannot succeed: the same verdict in a dry run), validate every text to write,
write the ConfigMap with its resourceVersion as precondition (re-reading and re-planning on a
conflict, so no concurrent edit is lost), then the ClusterPolicy and node labels (`writes`),
restart the plugin on the nodes the change reaches, `--max-unavailable` at a time, stopping at
the first that does not come back (`restarts`), and with `--wait` prove each node's allocatable
became physical × replicas (`capacity`). An interruption says what was written (`stop` before
the rollout). Returns rows (`results`) for the CLI to render. Must not decide what to change
nor render anything.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping

from kubectl_gpu import cluster, errors, keys
from kubectl_gpu.doctor.preview import Preview
from kubectl_gpu.sharing import rollout
from kubectl_gpu.sharing.deployment import Overrides
from kubectl_gpu.sharing.rollout import waits
from kubectl_gpu.workflows import comeback, preview
from kubectl_gpu.workflows.share import (
    capacity,
    drain,
    pluginpods,
    restarts,
    results,
    stop,
    writes,
)
from kubectl_gpu.workflows.share import state as sharestate
from kubectl_gpu.workflows.share.options import Options
from kubectl_gpu.workflows.share.results import ShareResult
from kubectl_gpu.workflows.share.state import Json, Snapshot
from kubectl_gpu.workflows.waiting import Timing

log = logging.getLogger(__name__)
ATTEMPTS = 5  # read-modify-write rounds before giving up on a ConfigMap that keeps changing
Planner = Callable[[Snapshot], rollout.Plan]


def share(
    api: cluster.Api,
    request: rollout.ShareRequest,
    options: Options,
    timing: Timing | None = None,
) -> ShareResult:
    """Share GPUs (`replicas` set) or stop sharing (`replicas` None) in the request's scope."""
    rollout.check_request(request)
    if request.nodes is not None or options.selector:
        try:
            found = sharestate.node_names(api, request.nodes or (), options.selector)
        except KeyboardInterrupt as e:
            raise stop.before_rollout(api, None, e) from e
        request = dataclasses.replace(request, nodes=found)

    def planner(snapshot: Snapshot) -> rollout.Plan:
        wanted = request
        if options.selector and request.nodes is not None:
            gpu = tuple(n for n in request.nodes if snapshot.state.node(n) is not None)
            for skipped in sorted(set(request.nodes) - set(gpu)):
                log.info("skipping node %s: it has no NVIDIA GPU", skipped)
            wanted = dataclasses.replace(request, nodes=gpu)
        return rollout.make(snapshot.state, wanted, options.force)

    action = "off" if request.replicas is None else "share"
    return _run(api, options, timing, planner, action)


def rollback(api: cluster.Api, options: Options, timing: Timing | None = None) -> ShareResult:
    """Restore what the last share/off/rollback replaced (its record on the ConfigMap)."""
    return _run(api, options, timing, lambda s: _plan_rollback(s, options.force), "rollback")


# ---- the rollout ---------------------------------------------------------------------------


def _run(
    api: cluster.Api, options: Options, timing: Timing | None, planner: Planner, action: str
) -> ShareResult:
    attempt: list[tuple[rollout.Plan, Json]] = []  # the plan and body being written, if any
    try:
        draft = _checked_write(api, options, timing, (planner, action), attempt)
    except KeyboardInterrupt as e:
        raise stop.before_rollout(api, attempt[-1] if attempt else None, e) from e
    if options.previewing or options.dry_run == "server":
        return draft
    timing = timing or Timing()
    done: list[restarts.Restart] = []
    pods: dict[str, str] = {}  # node -> uid of its plugin pod before the restarts
    try:
        return _roll(api, draft, timing, done, pods)
    except (errors.GpuError, KeyboardInterrupt) as e:
        raise _interrupted(draft, _restarted(api, draft, done, pods), e) from e


def _checked_write(
    api: cluster.Api,
    options: Options,
    timing: Timing | None,
    job: tuple[Planner, str],
    attempt: list[tuple[rollout.Plan, Json]],
) -> ShareResult:
    """Read, plan, check (refusals, drain) and write the ConfigMap, labels and ClusterPolicy;
    the result as written (or, previewing, as it would be). `attempt` gets each plan and body
    just before they are written, for an interruption to tell what landed."""
    planner, action = job
    overrides = Overrides(options.namespace, options.configmap)
    seen: Preview | None = None
    for number in range(1, ATTEMPTS + 1):
        snapshot = sharestate.read(api, overrides)
        plan = planner(snapshot)
        rendered = writes.texts(plan)
        draft = results.draft(action, plan, options, rendered, writes.validate(plan, rendered))
        body = writes.configmap_body(snapshot, plan, rendered, action == "rollback")
        if number == 1:
            _tell(snapshot, plan)
            # one read of pods for the warning and preview; the nodes and reports just read
            known = preview.read(api, snapshot.listed, snapshot.reports)
            _warn_overcommit(plan, {n.name: n.used for n in known.nodes})
            seen = preview.make(preview.share_changes(plan), known)
            drain.refuse_hits(seen, options)
            _refuse_hopeless_wait(snapshot, plan, options)
            _refuse_unasked_restarts(plan, options)
            _refuse_no_comeback(api, snapshot, plan, options)
            # drained before anything is written: config-manager and the operator may restart
            # the plugin on the write itself
            drain.drain_first(api, seen, options, timing or Timing())
        draft = dataclasses.replace(draft, preview=seen)
        if options.previewing:
            objects = writes.preview(snapshot, plan, body) if plan.writes else []
            return dataclasses.replace(draft, objects=tuple(objects))
        if options.dry_run == "none":
            attempt.append((plan, body))
        try:
            written = _write(api, snapshot, plan, body, options.dry_run == "server")
            return dataclasses.replace(draft, objects=tuple(written))
        except writes.Stale:
            log.warning(
                "ConfigMap %s/%s changed while this change was planned; reading it again "
                "(attempt %d of %d)",
                plan.namespace,
                plan.configmap,
                number + 1,
                ATTEMPTS,
            )
    raise errors.ClusterError(
        f"ConfigMap {plan.namespace}/{plan.configmap} kept changing; nothing was written",
        hint="someone else is editing it; try again when they are done",
    )


def _write(
    api: cluster.Api, snapshot: Snapshot, plan: rollout.Plan, body: Json, dry_run: bool
) -> list[Json]:
    if not plan.writes:
        return []
    written = [writes.write_configmap(api, plan, body, dry_run)]
    return written + writes.write_rest(api, snapshot, plan, dry_run)


def _roll(
    api: cluster.Api,
    draft: ShareResult,
    timing: Timing,
    done: list[restarts.Restart],
    pods: dict[str, str],
) -> ShareResult:
    plan, options = draft.plan, draft.options
    overall = timing.deadline(options.timeout)  # --timeout bounds restarts and --wait together
    restarted: dict[str, restarts.Restart] = {}
    if options.restart and plan.restarts:
        batch = (options.max_unavailable, options.timeout)
        nodes = {n.node: (n.key, n.product) for n in plan.restarts}
        # the plugin's pods: one LIST (which pod each node has now), then a watch
        with pluginpods.PluginPods(api, plan.deployment, timing) as watched:
            pods.update(watched.uids(nodes))
            for restart in restarts.roll(api, watched, nodes, batch, timing):
                done.append(restart)
        restarted = {r.node: r for r in done}
    readings: dict[str, capacity.Reading] = {}
    replaced = ""
    drained = drain.drained(draft.preview, options)
    if options.wait or drained:  # a drained node is given back only once its capacity shows
        alive = [n for n in plan.nodes if n.node not in restarted or restarted[n.node].ok]
        left = max(0.0, overall.end - timing.clock())
        readings, replaced = capacity.wait(api, alive, left, timing, _replaced(api, draft))
    rows = []
    for row, planned in zip(draft.nodes, plan.nodes, strict=True):
        row = results.after_restart(row, planned, restarted.get(planned.node))
        row = results.after_wait(row, planned, readings.get(planned.node), options.timeout)
        if replaced and row.result == "timed-out":
            row = dataclasses.replace(row, result="failed", message=replaced)
        rows.append(row)
    drain.give_back(api, drained, {r.node: r.failed for r in rows})
    return dataclasses.replace(draft, nodes=tuple(rows))


def _replaced(api: cluster.Api, draft: ShareResult) -> Callable[[], str]:
    """Whether another writer changed the ConfigMap after this change: waiting for this
    change's capacity is then pointless (a concurrent `share` won)."""
    plan = draft.plan
    written = (
        (draft.objects[0].get("metadata") or {}).get("resourceVersion") if draft.objects else None
    )

    def check() -> str:
        if written is None:
            return ""
        url = cluster.path("configmaps", plan.configmap, plan.namespace)
        now = (api.get(url).get("metadata") or {}).get("resourceVersion")
        if now == written:
            return ""
        return (
            f"ConfigMap {plan.namespace}/{plan.configmap} was changed by another writer after "
            "this change; the nodes follow that newer change, not this one. To have this "
            "change take effect, run this command again (it builds on the newer config); "
            f"`{writes.ROLLBACK}` would undo the other writer's change, not this one; "
            "`kubectl gpu share show` shows what each node reads"
        )

    return check


def _refuse_hopeless_wait(snapshot: Snapshot, plan: rollout.Plan, options: Options) -> None:
    """A --wait that cannot succeed is refused before anything is written (a dry run says
    the same), instead of running out its timeout after the change."""
    found = waits.problems(snapshot.state, plan) if options.wait else []
    if found:
        raise rollout.ShareRefused(
            "--wait would time out: the capacity it waits for can never show; nothing was written:",
            hint="leave those nodes out (--node, -l), share a resource they have (--resource), "
            "or drop --wait",
            details=tuple(found),
        )


def _refuse_unasked_restarts(plan: rollout.Plan, options: Options) -> None:
    """Nodes the request did not select whose plugin restarts anyway (a ClusterPolicy change:
    the GPU Operator rolls its DaemonSet over every GPU node) are said before anything is
    written, and the change goes on only with --yes; a dry run gives the same verdict."""
    beyond = plan.beyond_scope
    if not beyond or options.yes:
        return  # --no-restart changes nothing here: the operator restarts them itself
    policy = plan.policy
    assert policy is not None  # only a ClusterPolicy change restarts unselected nodes
    refusal = rollout.ShareRefused(
        f"this change restarts the device plugin on {len(beyond)} node(s) it does not select: "
        f"{', '.join(n.node for n in beyond)}: it changes ClusterPolicy {policy.name}'s "
        f"spec.devicePlugin.config ({_config_text(policy.before)} -> "
        f"{_config_text(policy.after)}), and the GPU Operator rolls its device-plugin "
        "DaemonSet over every GPU node; nothing was written:",
        hint="pass --yes to go on and restart them too (their capacity stays as it is); once "
        "the ClusterPolicy names the ConfigMap, later per-node changes restart only their nodes",
        details=tuple(f"node {n.node}: {n.reason}" for n in beyond),
    )
    if not options.diff:
        raise refusal
    said = refusal.message.removesuffix("; nothing was written:")
    log.warning("%s; the change itself needs --yes:\n  %s", said, "\n  ".join(refusal.details))


def _config_text(config: tuple[str, str] | None) -> str:
    return "(none)" if config is None else f"{{name: {config[0]}, default: {config[1]}}}"


def _refuse_no_comeback(
    api: cluster.Api, snapshot: Snapshot, plan: rollout.Plan, options: Options
) -> None:
    """Before anything is written, drained or deleted (a dry run says the same): each plugin
    pod the rollout deletes must come back. A ClusterPolicy change makes the GPU Operator roll
    its plugin on every node, so then every GPU node counts."""
    if plan.policy is not None:
        nodes = list(snapshot.nodes.values())
    elif options.restart:
        nodes = [snapshot.nodes[n.node] for n in plan.restarts if n.node in snapshot.nodes]
    else:
        return  # --no-restart: no pod is deleted
    comeback.check(api, plan.deployment, nodes, "restarting the device plugin")


def _plugin_uids(api: cluster.Api, draft: ShareResult) -> dict[str, str]:
    """The uid of each restarting node's plugin pod now (one list of the plugin's pods)."""
    wanted = {n.node for n in draft.plan.restarts}
    return pluginpods.uids(sharestate.plugin_pods(api, draft.plan.deployment), wanted)


def _restarted(
    api: cluster.Api, draft: ShareResult, done: list[restarts.Restart], before: dict[str, str]
) -> list[str]:
    """The nodes whose plugin the rollout replaced, read back from the cluster: a node whose
    pod was deleted counts even when its batch had not ended (Ctrl-C while waiting for the new
    pod); what the run itself saw stands where the cluster cannot be read."""
    seen = [r.node for r in done if r.ok]
    if not before:
        return seen
    try:
        now = _plugin_uids(api, draft)
    except (errors.GpuError, KeyboardInterrupt):
        return seen
    replaced = [node for node, uid in before.items() if now.get(node) != uid]
    return sorted(set(seen) | set(replaced))


def _interrupted(draft: ShareResult, ok: list[str], cause: BaseException) -> errors.GpuError:
    """What a rollout stopped mid-way left behind: what was written, on which nodes the
    plugin was restarted (`ok`, read back from the cluster), and how to finish or undo it (the
    ConfigMap's history makes `share rollback` undo it; running the command again restarts
    the nodes still on the older config: their capacity tells them apart)."""
    plan = draft.plan
    what = "interrupted" if isinstance(cause, KeyboardInterrupt) else "failed"
    reason = "" if isinstance(cause, KeyboardInterrupt) else f": {cause}"
    written = [f"ConfigMap {plan.namespace}/{plan.configmap}"]
    written += [
        f"{o.get('kind', 'object')} {o['metadata'].get('name', '')}" for o in draft.objects[1:]
    ]
    waiting = [n.node for n in plan.restarts if n.node not in ok]
    parts = [
        f"the rollout was {what} after writing {', '.join(written)}{reason}",
        f"the device plugin was restarted on: {', '.join(ok) or 'no node'}",
    ]
    if waiting:
        parts.append(f"not restarted (they still run the previous config): {', '.join(waiting)}")
    hint = (
        "to finish, run the same command again (the config is written, only the restarts "
        f"remain); to undo, run `{writes.ROLLBACK}`; `kubectl gpu share show` shows what "
        "each node reads now"
    )
    if isinstance(cause, errors.GpuError) and cause.hint:
        hint = f"{cause.hint}; then, {hint}"
    error = errors.GpuError("; ".join(parts), hint=hint)
    if isinstance(cause, KeyboardInterrupt):
        error.exit_code = errors.interrupted_code(cause)
    return error


def _tell(snapshot: Snapshot, plan: rollout.Plan) -> None:
    """What was found and what to know, on stderr."""
    log.info("%s", plan.deployment.describe())
    if plan.create and plan.writes:
        log.info(
            "ConfigMap %s/%s does not exist yet; it will be created", plan.namespace, plan.configmap
        )
    labels = ((snapshot.configmap or {}).get("metadata") or {}).get("labels") or {}
    if labels.get(keys.MANAGED_BY_LABEL) == "Helm" and plan.keys:
        log.warning(
            "ConfigMap %s/%s is rendered by the Helm chart (config.map): the next `helm "
            "upgrade` overwrites this change; keep configs in your own ConfigMap (config.name)",
            plan.namespace,
            plan.configmap,
        )
    for note in plan.notes:
        log.warning("%s", note)
    if plan.overwrites:  # only with --force: without it the plan is refused
        edits = "\n  ".join(plan.overwrites)
        log.warning("--force: overwriting what was edited since kubectl gpu wrote it:\n  %s", edits)


def _warn_overcommit(plan: rollout.Plan, in_use: Mapping[str, Mapping[str, int]]) -> None:
    """A node whose pods hold more than it will advertise: they keep running (kubelet does not
    evict them) but any of them that restarts, and any new pod, will not fit."""
    for node in plan.nodes:
        held = in_use.get(node.node, {}).get(node.resource, 0)
        if node.expected is not None and held > node.expected:
            log.warning(
                "node %s: running pods hold %d %s, but it will advertise %d: they keep running "
                "until restarted, then %d of them will not fit",
                node.node, held, node.resource, node.expected, held - node.expected,
            )  # fmt: skip


def _plan_rollback(snapshot: Snapshot, force: bool) -> rollout.Plan:
    state = snapshot.state
    configmap = state.configmap
    where = f"ConfigMap {configmap.namespace}/{configmap.name}"
    if not configmap.record:
        raise errors.GpuError(
            f"nothing to roll back: {where} carries no record of a change by kubectl gpu share "
            f"(annotation {keys.PREVIOUS_CONFIG_ANNOTATION})",
            hint="`kubectl gpu share show` shows what each node reads now",
        )
    record = rollout.decode(configmap.record, where)
    restored: dict[str, rollout.Doc] = {}
    for key, text in record.keys.items():
        if text is None:
            continue
        try:
            restored[key] = sharestate.parse(text, f"{where}:{key} (previous)")
        except ValueError as e:
            raise errors.ConfigError(f"the previous text of key {key} cannot be read: {e}") from e
    return rollout.rollback(state, record, restored, force)
