"""`kubectl gpu share`: share GPUs by time-slicing or MPS, prove it, show it, undo it.

Reads flags, builds the request and options, calls one workflow function
(kubectl_gpu.workflows.share) and renders its rows; the cluster adapter and the workflow are
imported inside the commands so that `--help` stays light. Exit 0 when every node reached its
expected capacity (or nothing was to be done), 1 when a node failed or timed out, 2 for usage.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import click

from kubectl_gpu.cli import render, signals
from kubectl_gpu.cli.params import Duration
from kubectl_gpu.cli.render import Column
from kubectl_gpu.cli.settings import Settings, global_options, pass_settings
from kubectl_gpu.errors import ConfigError, ExitCode, UsageError

F = Callable[..., Any]
RESULT_COLUMNS = (
    Column("NODE", lambda r: r.node),
    Column("GPUS", lambda r: r.gpus),
    Column("BEFORE", lambda r: r.before),
    Column("AFTER", lambda r: r.after),
    Column("PLUGIN POD", lambda r: r.plugin_pod),
    Column("RESULT", lambda r: r.result),
    Column("SECONDS", lambda r: r.seconds),
    Column("KEY", lambda r: r.key, wide_only=True),
    Column("STRATEGY", lambda r: r.strategy, wide_only=True),
    Column("REPLICAS", lambda r: r.replicas, wide_only=True),
    Column("RESOURCE", lambda r: r.resource, wide_only=True),
    Column("EXPECTED", lambda r: r.expected, wide_only=True),
    Column("MESSAGE", lambda r: r.message, wide_only=True),
)
SHOW_COLUMNS = (
    Column("NODE", lambda r: r.node),
    Column("KEY", lambda r: r.key),
    Column("STRATEGY", lambda r: r.strategy),
    Column("REPLICAS", lambda r: r.replicas),
    Column("GPUS", lambda r: r.gpus),
    Column("CAPACITY", lambda r: r.capacity),
    Column("ALLOCATABLE", lambda r: r.allocatable),
    Column("IN USE", lambda r: r.in_use),
    Column("PLUGIN", lambda r: r.plugin_status),
    Column("PROBLEMS", lambda r: len(r.problems)),
    Column("SELECTED BY", lambda r: r.selected_by, wide_only=True),
    Column("RESOURCE", lambda r: r.resource, wide_only=True),
    Column("PLUGIN POD", lambda r: r.plugin_pod, wide_only=True),
)


def _scope_options(f: F) -> F:
    f = click.option(
        "-l",
        "--selector",
        default="",
        metavar="SELECTOR",
        help="Change only the nodes matching this label selector (they get a key of their own).",
    )(f)
    return click.option(
        "--node",
        "nodes",
        multiple=True,
        metavar="NAME",
        help="Change only this node (repeatable; comma-separated names allowed).",
    )(f)


def _rollout_options(f: F) -> F:
    options = (
        click.option(
            "--dry-run",
            type=click.Choice(["none", "client", "server"]),
            default="none",
            is_flag=False,
            flag_value="client",
            help="Change nothing; say what the change would do: each node's capacity before "
            "and after, the running pods that would lose their GPU, and the ConfigMap keys "
            "and node labels it would write (client: checked here; server: the API server "
            "checks the objects too).",
        ),
        click.option(
            "--diff",
            is_flag=True,
            help="Print a unified diff of the ConfigMap and the label/ClusterPolicy "
            "changes, and write nothing.",
        ),
        click.option(
            "--no-restart",
            is_flag=True,
            help="Do not restart the device plugin (it reads changed keys only at start).",
        ),
        click.option(
            "--wait",
            is_flag=True,
            help="Wait until every node's allocatable is physical GPUs x replicas.",
        ),
        click.option(
            "--timeout",
            type=Duration(),
            default="5m",
            show_default=True,
            help="How long to wait for each restart batch, and for --wait.",
        ),
        click.option(
            "--max-unavailable",
            type=click.IntRange(min=1),
            metavar="N",
            default=1,
            show_default=True,
            help="How many nodes' plugins restart at a time.",
        ),
        click.option(
            "--configmap",
            metavar="NAME",
            help="The device plugin's ConfigMap, instead of the one detected.",
        ),
        click.option(
            "--drain",
            is_flag=True,
            help="Cordon each node whose pods lose their resource, evict them (honouring "
            "PodDisruptionBudgets), restart, wait for the capacity, uncordon.",
        ),
        click.option(
            "--drain-timeout",
            type=Duration(),
            default="5m",
            show_default=True,
            help="How long an eviction may keep being refused before the rollout stops.",
        ),
        click.option(
            "--force",
            is_flag=True,
            help="Change capacity although running pods use a resource that shrinks or goes "
            "(with --drain: evict pods no controller recreates); rollback: discard a hand "
            "edit made since the change it undoes.",
        ),
    )
    for option in reversed(options):
        f = option(f)
    return f


def _request_options(f: F) -> F:
    options = (
        click.option("--replicas", type=int, metavar="N", help="Replicas per GPU (2 or more)."),
        click.option(
            "--resource",
            default="nvidia.com/gpu",
            show_default=True,
            help="The resource to share, e.g. nvidia.com/mig-1g.10gb.",
        ),
        click.option("--mps", is_flag=True, help="Share with MPS instead of time-slicing."),
        click.option(
            "--rename-by-default/--no-rename-by-default",
            default=None,
            help="Advertise shared GPUs as <resource>.shared.",
        ),
        click.option(
            "--fail-requests-greater-than-one/--no-fail-requests-greater-than-one",
            default=None,
            help="Reject pods asking for more than one replica.",
        ),
        click.option(
            "--key",
            metavar="KEY",
            help="The ConfigMap key to write, instead of the default or a per-node one.",
        ),
    )
    for option in reversed(options):
        f = option(f)
    return f


@click.group(invoke_without_command=True, short_help="Share GPUs by time-slicing or MPS.")
@_request_options
@_scope_options
@_rollout_options
@global_options
@pass_settings
def share(settings: Settings, **flags: Any) -> None:
    """Share GPUs by time-slicing or MPS: validate, write, restart, and prove it.

    Without --node/-l the change is cluster-wide (the key unlabelled nodes read); with them,
    the selected nodes get a key of their own through the nvidia.com/device-plugin.config label.
    The previous config is kept for `kubectl gpu share rollback`.

    \b
    Examples:
      kubectl gpu share --replicas 4 --wait
      kubectl gpu share --replicas 2 --mps --node gpu-a --diff
      kubectl gpu share show
      kubectl gpu share off -l pool=inference --wait
    """
    ctx = click.get_current_context()
    if ctx.invoked_subcommand is not None:
        return
    if flags["replicas"] is None:
        raise UsageError("missing --replicas", hint="or use `kubectl gpu share show|off|rollback`")
    _run_change(settings, flags, replicas=flags["replicas"])


@share.command("off")
@click.option(
    "--resource",
    default="nvidia.com/gpu",
    show_default=True,
    help="The resource whose capacity --wait checks.",
)
@click.option("--key", metavar="KEY", help="The ConfigMap key to write, instead of the default.")
@_scope_options
@_rollout_options
@global_options
@pass_settings
def off(settings: Settings, **flags: Any) -> None:
    """Stop sharing in the selected scope (the sharing block is removed; replicas: 1 is invalid).

    \b
    Examples:
      kubectl gpu share off --wait
      kubectl gpu share off --node gpu-a
    """
    _run_change(settings, flags, replicas=None)


@share.command("rollback")
@_rollout_options
@global_options
@pass_settings
def rollback_cmd(settings: Settings, **flags: Any) -> None:
    """Restore the config, labels and ClusterPolicy the last share/off/rollback replaced.

    \b
    Examples:
      kubectl gpu share rollback --wait
    """
    from kubectl_gpu import cluster
    from kubectl_gpu.workflows import share as workflow

    _show_progress(settings)
    api = cluster.connect(settings.kubeconfig, settings.context)
    with signals.interruptible():
        result = _showing_findings(workflow.rollback, api, _options(settings, flags, ""))
    _render_result(result, settings)


@share.command("show")
@_scope_options
@click.option("--resource", default="nvidia.com/gpu", show_default=True)
@click.option("--configmap", metavar="NAME")
@global_options
@pass_settings
def show(
    settings: Settings, nodes: tuple[str, ...], selector: str, resource: str, configmap: str | None
) -> None:
    """Show how each GPU node shares its GPUs now: the device plugin config key it selects,
    the strategy (time-slicing, MPS, none) and replicas, its physical GPUs, the capacity the
    plugin advertises and how much pods use, the plugin pod, and every mismatch between them
    (each explained in a line after the table). Changes nothing.

    \b
    Examples:
      kubectl gpu share show
      kubectl gpu share show -o wide
    """
    from kubectl_gpu import cluster
    from kubectl_gpu.workflows import share as workflow
    from kubectl_gpu.workflows import sharereport

    api = cluster.connect(settings.kubeconfig, settings.context)
    options = workflow.Options(namespace=settings.namespace, configmap=configmap, selector=selector)
    status = workflow.show(api, options, resource, _names(nodes))
    click.echo(status.deployment.describe(), err=True)
    document = sharereport.status_document(status)
    render.emit_table(status.nodes, SHOW_COLUMNS, settings.output, document, name=render.node_name)
    if settings.output in ("table", "wide"):
        aside = settings.no_headers  # --no-headers: stdout holds the rows and nothing else
        for row in status.nodes:
            click.echo(f"{row.node}: {row.explain()}", err=aside)
            for problem in row.problems:
                click.echo(f"  problem: {problem}", err=aside)


# ---- adapters ---------------------------------------------------------------------------------


def _run_change(settings: Settings, flags: dict[str, Any], replicas: int | None) -> None:
    from kubectl_gpu import cluster
    from kubectl_gpu.sharing import rollout
    from kubectl_gpu.workflows import share as workflow

    if flags["nodes"] and flags["selector"]:
        raise UsageError("use either --node or -l, not both")
    request = rollout.ShareRequest(
        replicas=replicas,
        resource=flags["resource"],
        mps=flags.get("mps", False),
        rename_by_default=flags.get("rename_by_default"),
        fail_requests_greater_than_one=flags.get("fail_requests_greater_than_one"),
        nodes=_names(flags["nodes"]) if flags["nodes"] else None,  # -l is resolved later
        key=flags["key"],
    )
    rollout.check_request(request)  # bad input is refused before the cluster is contacted
    _show_progress(settings)
    api = cluster.connect(settings.kubeconfig, settings.context)
    options = _options(settings, flags, flags["selector"])
    with signals.interruptible():
        result = _showing_findings(workflow.share, api, request, options)
    _render_result(result, settings)


def _options(settings: Settings, flags: dict[str, Any], selector: str) -> Any:
    from kubectl_gpu.workflows import share as workflow

    return workflow.Options(
        dry_run=flags["dry_run"],
        diff=flags["diff"],
        restart=not flags["no_restart"],
        wait=flags["wait"],
        timeout=flags["timeout"],
        max_unavailable=flags["max_unavailable"],
        drain=flags["drain"],
        drain_timeout=flags["drain_timeout"],
        force=flags["force"],
        namespace=settings.namespace,
        configmap=flags["configmap"],
        selector=selector,
    )


def _names(given: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(n.strip() for item in given for n in item.split(",") if n.strip())


def _show_progress(settings: Settings) -> None:
    """Progress of a rollout is the command's output on stderr, not debug chatter."""
    if settings.verbosity == 0:
        logging.getLogger("kubectl_gpu.workflows").setLevel(logging.INFO)


def _render_result(result: Any, settings: Settings) -> None:
    from kubectl_gpu.workflows import sharereport

    for finding in result.warnings:
        click.echo(render.format_finding(finding), err=True)
    options = result.options
    if result.preview is not None and (options.diff or settings.output in ("table", "wide")):
        for line in render.preview_lines(result.preview):
            click.echo(line, err=True)
    if options.diff:
        click.echo(sharereport.diff(result) or "no changes\n", nl=False)
        return
    dry = options.dry_run != "none"
    if dry and render.is_data(settings.output):
        document = render.dry_run_list(result.objects, result.preview)
        render.emit_table([], (), settings.output, document)
        return
    if result.nodes or render.is_data(settings.output):
        document = sharereport.result_document(result)
        render.emit_table(
            result.nodes, RESULT_COLUMNS, settings.output, document, name=render.node_name
        )
    for row in result.nodes:
        if row.failed:
            click.echo(f"node {row.node}: {row.result}: {row.message}", err=True)
    click.echo(_summary(result), err=True)
    if result.failed:
        click.echo("hint: restore the previous config with `kubectl gpu share rollback`", err=True)
        click.get_current_context().exit(int(ExitCode.ERROR))


def _summary(result: Any) -> str:
    plan = result.plan
    written = ", ".join(c.key for c in plan.keys) or "no key"
    verb = "would write" if result.options.dry_run != "none" else "wrote"
    labels = f"{len(plan.labels)} label(s)"
    counts: dict[str, int] = {}
    for row in result.nodes:
        counts[row.result] = counts.get(row.result, 0) + 1
    outcome = ", ".join(f"{n} {r}" for r, n in sorted(counts.items())) or _untouched(plan)
    return f"ConfigMap {plan.namespace}/{plan.configmap}: {verb} {written}, {labels}; {outcome}"


def _untouched(plan: Any) -> str:
    """Why a change reached no node: each node selects another key (told above), or there
    is no GPU node at all."""
    if not plan.keys and not plan.labels:
        return "nothing changed: every node already has this config"
    return (
        "no node changed: no GPU node reads the key written now (each selects its own key, "
        "see above); nodes that select it later get it"
    )


def _showing_findings(function: F, *args: Any) -> Any:
    """Call a workflow; a refused config's findings are printed before the error line."""
    try:
        return function(*args)
    except ConfigError as e:
        for finding in e.findings:
            click.echo(render.format_finding(finding), err=True)  # type: ignore[arg-type]
        raise
