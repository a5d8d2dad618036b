"""`kubectl gpu top`: what each pod uses of the GPUs it holds, and what limit holds it.

Owns the command line of `top` and its tables. It asks `workflows.top` for the rows (read on
demand from each node's agent, or dcgm-exporter, through the API server's pod proxy), prints
on stderr where the figures come from and the nodes that did not answer, and renders the
rows: per node → physical GPU → replica / MIG instance / DRA device → pod. The default table
fits 120 columns; `-o wide` adds containers, PIDs, neighbours and notes. Imports only click
and light modules at module level (the cluster client inside the command).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import click

from kubectl_gpu.cli import render
from kubectl_gpu.cli.params import Duration
from kubectl_gpu.cli.render import Column
from kubectl_gpu.cli.settings import Settings, global_options, pass_settings
from kubectl_gpu.errors import GpuError, UsageError, interrupted_code, printable
from kubectl_gpu.usage import isolation, view
from kubectl_gpu.usage.view import TopRow

if TYPE_CHECKING:
    from kubectl_gpu.workflows.top import IdleRow, Scope, TopReading

TOP_KIND = "GPUTop"
IDLE_KIND = "GPUIdle"
MIN_INTERVAL = 1.0


@dataclasses.dataclass(frozen=True)
class TopRequest:
    """The command's own flags (the global ones are in `Settings`)."""

    target: tuple[str, ...]
    all_namespaces: bool
    selector: str | None
    sort_by: str | None
    watch: bool
    interval: float
    idle: float | None
    node_timeout: float
    tree: bool


@click.command("top", short_help="Show what each pod uses of its GPUs, and what limits it.")
@click.argument("target", nargs=-1, metavar="[node/NAME | pod NAME]")
@click.option("-A", "--all-namespaces", is_flag=True, help="Show pods of every namespace.")
@click.option("-l", "--selector", metavar="SELECTOR", help="Only pods with these labels.")
@click.option("--sort-by", type=click.Choice(["memory", "sm"]), help="Busiest pods first.")
@click.option("-w", "--watch", is_flag=True, help="Read again every --interval until Ctrl-C.")
@click.option(
    "--interval",
    type=Duration(),
    default="5s",
    show_default=True,
    help="Time between reads with --watch.",
)
@click.option(
    "--idle",
    type=Duration(),
    metavar="DURATION",
    help="List pods that hold GPU devices but used none over DURATION (e.g. 30m).",
)
@click.option(
    "--node-timeout",
    type=Duration(),
    default="10s",
    show_default=True,
    help="How long each node may take to answer.",
)
@click.option(
    "--tree",
    is_flag=True,
    help="Draw node → GPU → MIG device / replica / DRA device → pod, with use and free.",
)
@global_options
@pass_settings
def top(settings: Settings, **flags: Any) -> None:
    """Show GPU memory and SM use per pod, on every sharing form, with its isolation.

    Per node and physical GPU: the GPU's own totals, then each pod holding a whole GPU, a
    time-slice or MPS replica (`::N`), a MIG instance or a DRA device, with the memory and
    SM % of its own processes (or why there is no SM figure: MIG, no samples), and LIMIT:
    what holds it there (whole GPU, MIG instance memory, MPS pinned memory and thread %, or
    none under time-slicing, naming the neighbours that could take its memory in -o wide).
    Processes in no pod (system or leaked) are shown too.

    The figures are read now, from the kubectl-gpu agent on each node (or, without it,
    from dcgm-exporter, whose per-pod figures are device copies unless it reports
    per-process values) through the API server's pod proxy: you need `get pods/proxy`
    (docs/rbac.md). Nodes that do not answer within --node-timeout are named on stderr and
    the others shown; the command then exits 1.

    \b
    Examples:
      kubectl gpu top -A
      kubectl gpu top node/gpu-node-1 -o wide
      kubectl gpu top pod train-0 -n ml
      kubectl gpu top -A --sort-by memory
      kubectl gpu top -A --idle 1h
      kubectl gpu top node/gpu-node-1 --tree
    """
    request = TopRequest(**flags)
    if request.interval < MIN_INTERVAL:
        raise UsageError(f"--interval must be at least {MIN_INTERVAL:g}s")
    if request.watch and request.idle is not None:
        raise UsageError("--idle looks back over a window: it cannot be combined with --watch")
    if request.tree and (request.idle is not None or settings.output not in ("table", "wide")):
        raise UsageError(
            "--tree draws the rows as a picture: it cannot be combined with --idle or -o "
            f"{settings.output}",
            hint="-o json gives every figure the picture shows",
        )
    scope = _scope(request, settings)
    if request.watch:
        _watch(request, settings, scope)
    failed = _once(request, settings, scope)
    if failed:
        raise GpuError(
            f"{len(failed)} node(s) did not answer: {', '.join(sorted(failed))}",
            hint="the other nodes are shown above; try again, or raise --node-timeout",
        )


def _watch(request: TopRequest, settings: Settings, scope: Scope) -> NoReturn:
    """Read and print every `--interval` until Ctrl-C, which ends the watch as it ends
    `kubectl get -w`: at once, exit 130, nothing more printed (the command changes nothing)."""
    try:
        while True:
            _once(request, settings, scope)
            time.sleep(request.interval)
    except KeyboardInterrupt:
        raise click.exceptions.Exit(interrupted_code(KeyboardInterrupt())) from None


def _scope(request: TopRequest, settings: Settings) -> Scope:
    from kubectl_gpu.workflows.top import Scope

    node, pod = _target(request.target)
    if pod is not None and request.all_namespaces:
        raise UsageError("a pod is named in one namespace: give -n, not -A")
    namespace = None if request.all_namespaces else settings.namespace  # as `map`: None, all
    if pod is not None and namespace is None:
        namespace = _context_namespace(settings)  # as `kubectl top pod NAME`
    return Scope(node=node, pod=pod, namespace=namespace, selector=request.selector)


def _context_namespace(settings: Settings) -> str:
    from kubectl_gpu import cluster

    return cluster.connect(settings.kubeconfig, settings.context).namespace


def _target(target: tuple[str, ...]) -> tuple[str | None, str | None]:
    """(node, pod) from `node/NAME`, `node NAME`, `pod/NAME` or `pod NAME`."""
    words = [w for t in target for w in t.split("/", 1)] if len(target) == 1 else list(target)
    if not words:
        return None, None
    if len(words) == 2 and words[0] in ("node", "nodes", "no") and words[1]:
        return words[1], None
    if len(words) == 2 and words[0] in ("pod", "pods", "po") and words[1]:
        return None, words[1]
    raise UsageError(
        f"cannot read {' '.join(target)!r}: name node/NAME or pod NAME",
        hint="kubectl gpu top node/gpu-node-1, kubectl gpu top pod train-0 -n ml",
    )


def _once(request: TopRequest, settings: Settings, scope: Scope) -> dict[str, str]:
    reading = _read(request, settings, scope)
    if not settings.no_headers:
        click.echo(header(reading), err=True)
    for node, why in sorted(reading.failed.items()):
        click.echo(f"node {printable(node)}: {printable(why)}", err=True)
    if reading.idle is not None:
        _emit_idle(reading.idle, settings.output)
    elif request.tree:
        from kubectl_gpu.usage import tree

        for line in tree.lines(sort(reading.rows, request.sort_by)):
            click.echo(printable(line))
    else:
        rows = sort(reading.rows, request.sort_by)
        document = {
            **render.list_document(TOP_KIND, [r.to_dict() for r in rows]),
            "source": _source(reading),
            "failedNodes": [{"node": n, "reason": w} for n, w in sorted(reading.failed.items())],
        }
        render.emit_table(rows, columns(), settings.output, document, render.node_name)
    return reading.failed


def _read(request: TopRequest, settings: Settings, scope: Scope) -> TopReading:
    from kubectl_gpu import cluster  # lazy: --help never loads kubernetes
    from kubectl_gpu.workflows import top as reading

    api = cluster.connect(settings.kubeconfig, settings.context)
    options = reading.Options(deadline=request.node_timeout, idle=request.idle)
    return reading.read(api, scope, options)


def _source(reading: TopReading) -> dict[str, Any]:
    return {
        "kind": reading.source,
        "perProcess": reading.per_process,
        "nodes": reading.nodes,
        "readAt": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def header(reading: TopReading) -> str:
    """The line on stderr saying where the figures come from."""
    nodes = f"{reading.nodes} node{'s' if reading.nodes != 1 else ''}"
    where = f"on {nodes}, read now through the API server's pod proxy"
    if reading.source == "agent":
        return f"GPU use from the kubectl-gpu agent {where}"
    if reading.per_process:
        return f"GPU use from dcgm-exporter (per-process values) {where}"
    return (
        f"GPU use from dcgm-exporter {where}; it copies each device's figures onto the pods "
        "sharing it, so pods show none of their own (the GPU rows hold them)"
    )


def sort(rows: Sequence[TopRow], by: str | None) -> list[TopRow]:
    """Rows grouped by GPU; with `by`, the busiest pods first in each GPU, and the GPUs
    with the busiest pods first."""
    if by is None:
        return list(rows)
    groups: dict[tuple[str, str], list[TopRow]] = {}
    for r in rows:
        groups.setdefault((r.node, r.gpu_uuid), []).append(r)

    def key(r: TopRow) -> int:
        value = r.memory_used if by == "memory" else r.sm_percent
        return -(value or 0)

    ordered = []
    for group in groups.values():
        head = [r for r in group if r.kind == view.GPU]
        rest = sorted((r for r in group if r.kind != view.GPU), key=key)
        ordered.append((min((key(r) for r in rest), default=0), head + rest))
    return [r for _, group in sorted(ordered, key=lambda g: g[0]) for r in group]


# --- the table -----------------------------------------------------------------------------------


def columns() -> list[Column]:
    """The table's columns: the default ones fit 120 columns, `-o wide` adds the rest."""
    return [
        Column("NODE", lambda r: r.node),
        Column("GPU", lambda r: r.gpu_index),
        Column("DEVICE", _device),
        Column("POD", _pod),
        Column("CONTAINER", lambda r: r.container, wide_only=True),
        Column("MEMORY", _memory),
        Column("SM", view.sm_text),
        Column("LIMIT", _limit),
        Column("PIDS", lambda r: ",".join(map(str, r.pids[:8])) or None, wide_only=True),
        Column(
            "NEIGHBOURS",
            lambda r: ",".join(r.limit.neighbours) if r.limit else None,
            wide_only=True,
        ),
        Column("UUID", lambda r: r.gpu_uuid, wide_only=True),
        Column("NOTE", lambda r: r.note, wide_only=True),
    ]


def _device(r: TopRow) -> str:
    return "(gpu)" if r.kind == view.GPU else r.device


def _pod(r: TopRow) -> str | None:
    if r.kind == view.GPU:
        return f"({r.model or 'GPU'})"
    if r.kind == view.NO_POD:
        return f"<no pod> pid {r.pids[0]}" if r.pids else "<no pod>"
    return r.pod_ref


def _memory(r: TopRow) -> str:
    if r.copied:
        return "(device)"
    used = isolation.size(r.memory_used)
    if r.kind == view.GPU and r.memory_total is not None:
        return f"{used}/{isolation.size(r.memory_total)}"
    return used


def _limit(r: TopRow) -> str | None:
    if r.limit is None:
        return None
    if r.limit.form == isolation.NONE:
        n = len(r.limit.neighbours)
        return f"none: {n} neighbour{'s' if n != 1 else ''}" if n else "none"
    return r.limit.text()


def _emit_idle(rows: list[IdleRow], output: str) -> None:
    document = render.list_document(IDLE_KIND, [_idle_dict(r) for r in rows])
    render.emit_table(rows, idle_columns(), output, document, render.node_name)


def idle_columns() -> list[Column]:
    """`--idle`'s columns."""
    from kubectl_gpu.cli import durations

    return [
        Column("NODE", lambda r: r.node),
        Column("DEVICE-ID", lambda r: r.idle.holder.device_id),
        Column(
            "POD",
            lambda r: (
                f"{r.idle.holder.namespace}/{r.idle.holder.pod}"
                if r.idle.holder.pod
                else r.idle.holder.pod_uid
            ),
        ),
        Column("CONTAINER", lambda r: r.idle.holder.container),
        Column("IDLE-FOR", lambda r: durations.human(r.idle.covered)),
        Column("SAMPLES", lambda r: r.idle.samples),
        Column("NOTE", lambda r: None if r.idle.sm_known else "MIG: no SM figure; held no memory"),
    ]


def _idle_dict(r: IdleRow) -> dict[str, Any]:
    h = r.idle.holder
    return {
        "node": r.node,
        "deviceID": h.device_id,
        "namespace": h.namespace,
        "pod": h.pod,
        "podUID": h.pod_uid,
        "container": h.container,
        "idleSeconds": round(r.idle.covered),
        "samples": r.idle.samples,
        "smKnown": r.idle.sm_known,
    }
