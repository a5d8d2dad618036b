"""`kubectl gpu mig apply` and `kubectl gpu mig status`: hand a MIG config to the nodes, and
show where each node stands.

Registered on the `mig` group by cli/mig/__init__.py. Reads flags, calls one workflow
(`workflows.mig.apply.run`, `workflows.mig.status.status`) and renders its rows; the
cluster adapter and workflows are imported inside the commands so that `--help` stays light.
`apply` exits 0 when every node took the request (or reached `success` with --wait), 1 when
any node failed the offline check (then nothing is written), failed, or timed out.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

import click

from kubectl_gpu.cli import inputs, params, render, signals
from kubectl_gpu.cli.params import Duration, stuck_after_option
from kubectl_gpu.cli.render import Column
from kubectl_gpu.cli.settings import Settings, global_options, pass_settings
from kubectl_gpu.errors import ExitCode

if TYPE_CHECKING:
    from kubectl_gpu.workflows.mig.results import ApplyResult, NodeResult

HEARTBEAT = 5.0  # seconds between progress lines on a terminal while nothing changes
_APPLY_COLUMNS = (
    Column("NODE", lambda r: r.node),
    Column("ACTUATOR", lambda r: r.actuator.value),
    Column("GPUS", lambda r: r.gpus),
    Column("RESULT", lambda r: r.result),
    Column("SECONDS", lambda r: r.seconds),
    Column("REASON", lambda r: r.reason),
    Column("REQUEST", lambda r: r.request, wide_only=True),
    Column("RESOURCES", lambda r: r.resources, wide_only=True),
    Column("LAYOUT", lambda r: [f"{i}: {t}" for i, t in r.layout.items()], wide_only=True),
)
_STATUS_COLUMNS = (
    Column("NODE", lambda r: r[0].node),
    Column("ACTUATOR", lambda r: r[0].actuator.value),
    Column("DESIRED", lambda r: r[0].desired),
    Column("APPLIED", lambda r: r[0].applied),
    Column("STATE", lambda r: r[0].state),
    Column("GPU", lambda r: None if r[1] is None else r[1].index),
    Column("LAYOUT", lambda r: None if r[1] is None else r[1].layout),
    Column("REASON", lambda r: r[0].reason),
    Column("STUCK", lambda r: "yes" if r[0].stuck else "", wide_only=True),
    Column("PHASE", lambda r: r[0].phase, wide_only=True),
    Column("PRODUCT", lambda r: None if r[1] is None else r[1].name, wide_only=True),
    Column("REQUEST", lambda r: r[0].request, wide_only=True),
)


@click.command("apply")
@click.option(
    "-f",
    "--filename",
    required=True,
    metavar="FILE",
    help="A mig-parted config, or a ConfigMap holding one under config.yaml; - is stdin.",
)
@click.option(
    "-c",
    "--config",
    "config_name",
    required=True,
    metavar="NAME",
    help="The config name in the file to apply.",
)
@click.option(
    "--node",
    "nodes",
    multiple=True,
    metavar="NAME",
    help="A node to change (repeatable; comma-separated names allowed).",
)
@click.option(
    "-l",
    "--selector",
    default="",
    metavar="SELECTOR",
    help="Change the GPU nodes matching this label selector.",
)
@click.option("--all", "all_nodes", is_flag=True, help="Change every GPU node.")
@params.dry_run_option(
    "client: print what would be written; server: have the API server check "
    "it too. Nothing is written."
)
@click.option(
    "--force",
    is_flag=True,
    help="Change GPUs although they are in use, and retry a request that failed.",
)
@click.option(
    "--drain",
    is_flag=True,
    help="Cordon each node whose pods the change hits, evict them (honouring "
    "PodDisruptionBudgets), apply, wait, uncordon.",
)
@click.option(
    "--drain-timeout",
    type=Duration(),
    default="5m",
    show_default=True,
    help="How long an eviction may keep being refused before the run stops.",
)
@click.option(
    "--max-unavailable",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Nodes drained and changed at once (--drain).",
)
@click.option("--wait", is_flag=True, help="Wait until every node reports a final state.")
@click.option(
    "--timeout", type=Duration(), default="10m", show_default=True, help="How long --wait waits."
)
@global_options
@pass_settings
def apply_cmd(settings: Settings, **flags: Any) -> None:
    """Check a MIG config against each node's GPUs offline, then have the nodes apply it.

    Each node's GPUs come from kubectl gpu's agent report, else GPU Feature Discovery labels.
    If any node fails the check, nothing is written. Where the GPU Operator's MIG manager
    manages a node, its ConfigMap and nvidia.com/mig.config label are used instead of ours.

    A change that would take devices from running pods is refused, naming them, unless
    --drain (evict them first, through the Eviction API) or --force (change the GPUs under
    them). --dry-run shows those pods, capacity before and after, and the Pending GPU pods
    that would fit afterwards. Each --drain step is recorded on the Node: run the command
    again to resume, or `kubectl gpu mig recover NODE --force` to undo.

    \b
    Examples:
      kubectl gpu mig apply -f mig.yaml -c all-balanced --node gpu-node-1 --wait
      kubectl gpu mig apply -f mig.yaml -c all-1g.10gb -l pool=inference --dry-run -o yaml
      kubectl gpu mig apply -f mig.yaml -c all-3g.40gb --node gpu-node-1 --drain
    """
    from kubectl_gpu import cluster
    from kubectl_gpu.workflows.mig import apply as mig_apply
    from kubectl_gpu.workflows.mig import targets as mig_targets
    from kubectl_gpu.workflows.mig.request import ApplyRequest
    from kubectl_gpu.workflows.waiting import Timing

    names = tuple(n.strip() for item in flags["nodes"] for n in item.split(",") if n.strip())
    scope = mig_targets.Scope(names, flags["selector"], flags["all_nodes"])
    scope.check()
    filename, document = _load(flags["filename"], flags["config_name"])
    request = ApplyRequest(
        file=filename,
        document=document,
        config=flags["config_name"],
        scope=scope,
        dry_run=flags["dry_run"],
        force=flags["force"],
        wait=flags["wait"],
        timeout=flags["timeout"],
        namespace=settings.namespace,
        drain=flags["drain"],
        drain_timeout=flags["drain_timeout"],
        max_unavailable=flags["max_unavailable"],
    )
    if settings.verbosity == 0:  # progress is this command's talk on stderr
        logging.getLogger("kubectl_gpu.workflows").setLevel(logging.INFO)
    api = cluster.connect(settings.kubeconfig, settings.context)
    timing = Timing(heartbeat=HEARTBEAT if sys.stderr.isatty() else None)
    with signals.interruptible():
        result = mig_apply.run(api, request, timing)
    _render_apply(result, settings.output)


@click.command("status")
@click.option("--node", "nodes", multiple=True, metavar="NAME", help="Only this node (repeatable).")
@click.option(
    "-l",
    "--selector",
    default="",
    metavar="SELECTOR",
    help="Only the GPU nodes matching this label selector.",
)
@stuck_after_option
@global_options
@pass_settings
def status_cmd(
    settings: Settings, nodes: tuple[str, ...], selector: str, stuck_after: float
) -> None:
    """Show each GPU node's MIG config: desired, applied, state, reason and layout per GPU,
    and the nodes whose change is stuck (with the command that recovers them).

    A node is stuck when its change has been pending longer than --stuck-after, when the GPU
    Operator's operands are left paused-for-mig-change with no change running, or when its
    state says success but the agent's report shows other MIG devices.
    """
    import datetime as dt

    from kubectl_gpu import cluster
    from kubectl_gpu.workflows.mig import status as mig_status
    from kubectl_gpu.workflows.mig import targets as mig_targets

    names = tuple(n.strip() for item in nodes for n in item.split(",") if n.strip())
    api = cluster.connect(settings.kubeconfig, settings.context)
    after = dt.timedelta(seconds=stuck_after)
    found = mig_status.status(api, mig_targets.Scope(names, selector), after=after)
    rows = [(n, g) for n in found for g in (n.gpus or (None,))]
    render.emit_table(
        rows, _STATUS_COLUMNS, settings.output, mig_status.document(found),
        name=lambda row: render.node_name(row[0]),
    )  # fmt: skip
    for node in (n for n in found if n.stuck):
        render.say(f"node {node.node}: MIG change stuck: {'; '.join(node.stuck)}", err=True)
        render.say(f"  recover it: kubectl gpu mig recover {node.node}", err=True)


def _load(filename: str, config: str) -> tuple[str, dict[str, Any]]:
    """The file's name and its parsed mig-parted document, strictly validated."""
    name, accepted = inputs.load_mig_config(filename)
    accepted.config.select(config)  # an unknown name fails before any cluster read
    return name, accepted.data


def _still_asked(row: NodeResult) -> str:
    """A timed-out wait withdraws nothing: the label stays, and an actuator that starts later
    applies it (possibly at a worse time): say so, and how to take the request back."""
    from kubectl_gpu import keys
    from kubectl_gpu.mig.actuators import Actuator

    label = keys.MIG_CONFIG_LABEL if row.actuator is Actuator.OPERATOR else keys.MIG_DESIRED_LABEL
    return (
        f"  the request on {row.node} stays: it is applied whenever the node's actuator takes it "
        f"up; to withdraw it: kubectl label node {row.node} {label}-"
    )


def _render_apply(result: ApplyResult, output: str) -> None:
    from kubectl_gpu.workflows.mig import report as mig_report

    dry = result.request.dry_run != "none"
    if dry and result.written is False and not result.failed and render.is_data(output):
        render.emit_table([], (), output, render.dry_run_list(result.objects, result.preview))
    else:
        render.emit_table(
            result.nodes, _APPLY_COLUMNS, output, mig_report.document(result), name=render.node_name
        )
    if result.preview is not None and output in ("table", "wide"):
        for line in render.preview_lines(result.preview):
            render.say(line, err=True)
    for row in result.nodes:
        if row.failed:
            render.say(f"node {row.node}: {row.result}: {row.reason}", err=True)
        if row.result == "timeout":
            render.say(_still_asked(row), err=True)
    click.echo(mig_report.summary(result), err=True)
    if result.failed:
        click.get_current_context().exit(int(ExitCode.ERROR))
