"""How a sharing change is shown: the table, the preview, the diff and the summary line.

Owns rendering a `workflows.share.results.ShareResult`: findings and the preview on stderr,
the unified diff (--diff), the objects a dry run would write (-o json|yaml), else the per-node
table and one summary line; a failed node exits 1 with the rollback hint. Must not call a
workflow.
"""

from __future__ import annotations

from typing import Any

import click

from kubectl_gpu.cli import render
from kubectl_gpu.cli.render import Column
from kubectl_gpu.cli.settings import Settings
from kubectl_gpu.errors import ExitCode

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


def render_result(result: Any, settings: Settings) -> None:
    from kubectl_gpu.workflows.share import report as sharereport

    for finding in result.warnings:
        click.echo(render.format_finding(finding), err=True)
    options = result.options
    if result.preview is not None and (options.diff or settings.output in ("table", "wide")):
        for line in render.preview_lines(result.preview) + _isolation_lines(result.nodes):
            render.say(line, err=True)
    if options.diff:
        render.say(sharereport.diff(result) or "no changes\n", nl=False)
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
            render.say(f"node {row.node}: {row.result}: {row.message}", err=True)
    click.echo(_summary(result), err=True)
    _note_rights(result)
    if result.failed:
        click.echo("hint: restore the previous config with `kubectl gpu share rollback`", err=True)
        click.get_current_context().exit(int(ExitCode.ERROR))


def _note_rights(result: Any) -> None:
    """A client dry run plans writes it never sends: whether the user may make them only the
    API server can say."""
    if result.options.dry_run == "client" and result.plan.writes:
        click.echo(
            "note: a client dry run does not check your rights; `--dry-run=server` sends the "
            "writes to the API server, which checks that you may make them",
            err=True,
        )


def _isolation_lines(nodes: Any) -> list[str]:
    """What the config leaves each pod: a whole GPU, an MPS cap, or no isolation (per node,
    nodes that are left the same grouped)."""
    from kubectl_gpu.usage import isolation

    return render.by_node(
        (n.node, f"per pod: {isolation.statement(n.strategy, n.replicas)}") for n in nodes
    )


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
