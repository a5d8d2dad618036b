"""`kubectl gpu share show`: how each GPU node shares its GPUs now. Changes nothing.

Registered on the `share` group by cli/share/__init__.py. Calls `workflows.share.show.show`
and renders a row per GPU node, then on a terminal each node's explanation and problems.
"""

from __future__ import annotations

import click

from kubectl_gpu.cli import render
from kubectl_gpu.cli.render import Column
from kubectl_gpu.cli.settings import Settings, global_options, pass_settings
from kubectl_gpu.cli.share.options import names, scope_options

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


@click.command("show")
@scope_options
@click.option(
    "--resource",
    metavar="NAME",
    help="The resource to report on every node (default: the one each node's config shares, "
    "else nvidia.com/gpu).",
)
@click.option("--configmap", metavar="NAME")
@global_options
@pass_settings
def show(
    settings: Settings,
    nodes: tuple[str, ...],
    selector: str,
    resource: str | None,
    configmap: str | None,
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
    from kubectl_gpu.workflows.share import report as sharereport
    from kubectl_gpu.workflows.share import show as workflow
    from kubectl_gpu.workflows.share.options import Options

    api = cluster.connect(settings.kubeconfig, settings.context)
    options = Options(namespace=settings.namespace, configmap=configmap, selector=selector)
    status = workflow.show(api, options, resource, names(nodes))
    render.say(status.deployment.describe(), err=True)
    document = sharereport.status_document(status)
    render.emit_table(status.nodes, SHOW_COLUMNS, settings.output, document, name=render.node_name)
    if settings.output in ("table", "wide"):
        aside = settings.no_headers  # --no-headers: stdout holds the rows and nothing else
        for row in status.nodes:
            render.say(f"{row.node}: {row.explain()}", err=aside)
            for problem in row.problems:
                render.say(f"  problem: {problem}", err=aside)
