"""`kubectl gpu share`, `share off` and `share rollback`: a sharing change, from flags to rows.

Reads flags, builds the request and options, calls one workflow function
(kubectl_gpu.workflows.share.change) and hands its result to `result`; the cluster adapter
and the workflow are imported inside the commands so that `--help` stays light. Exit 0 when
every node reached its expected capacity (or nothing was to be done), 1 when a node failed or
timed out, 2 for usage. `off` and `rollback` are registered on the group by
cli/share/__init__.py; the group's own body calls `run`.
"""

from __future__ import annotations

import logging
from typing import Any

import click

from kubectl_gpu.cli import render, signals
from kubectl_gpu.cli.settings import Settings, global_options, pass_settings
from kubectl_gpu.cli.share.options import F, names, rollout_options, scope_options
from kubectl_gpu.cli.share.result import render_result
from kubectl_gpu.errors import ConfigError, UsageError


@click.command("off")
@click.option(
    "--resource",
    default="nvidia.com/gpu",
    show_default=True,
    help="The resource whose capacity --wait checks.",
)
@click.option("--key", metavar="KEY", help="The ConfigMap key to write, instead of the default.")
@scope_options
@rollout_options
@global_options
@pass_settings
def off(settings: Settings, **flags: Any) -> None:
    """Stop sharing in the selected scope (the sharing block is removed; replicas: 1 is invalid).

    \b
    Examples:
      kubectl gpu share off --wait
      kubectl gpu share off --node gpu-a
    """
    run(settings, flags, replicas=None)


@click.command("rollback")
@rollout_options
@global_options
@pass_settings
def rollback_cmd(settings: Settings, **flags: Any) -> None:
    """Restore the config, labels and ClusterPolicy the last share/off/rollback replaced.

    \b
    Examples:
      kubectl gpu share rollback --wait
    """
    from kubectl_gpu import cluster
    from kubectl_gpu.workflows.share import change as workflow

    _show_progress(settings)
    api = cluster.connect(settings.kubeconfig, settings.context)
    with signals.interruptible():
        result = _showing_findings(workflow.rollback, api, _options(settings, flags, ""))
    render_result(result, settings)


# ---- adapters ---------------------------------------------------------------------------------


def run(settings: Settings, flags: dict[str, Any], replicas: int | None) -> None:
    """`share` (replicas given) or `off` (None): check the flags, then run and render the change."""
    from kubectl_gpu import cluster
    from kubectl_gpu.sharing import rollout
    from kubectl_gpu.workflows.share import change as workflow

    if flags["nodes"] and flags["selector"]:
        raise UsageError("use either --node or -l, not both")
    request = rollout.ShareRequest(
        replicas=replicas,
        resource=flags["resource"],
        mps=flags.get("mps", False),
        rename_by_default=flags.get("rename_by_default"),
        fail_requests_greater_than_one=flags.get("fail_requests_greater_than_one"),
        nodes=names(flags["nodes"]) if flags["nodes"] else None,  # -l is resolved later
        key=flags["key"],
    )
    rollout.check_request(request)  # bad input is refused before the cluster is contacted
    _show_progress(settings)
    api = cluster.connect(settings.kubeconfig, settings.context)
    options = _options(settings, flags, flags["selector"])
    with signals.interruptible():
        result = _showing_findings(workflow.share, api, request, options)
    render_result(result, settings)


def _options(settings: Settings, flags: dict[str, Any], selector: str) -> Any:
    from kubectl_gpu.workflows.share.options import Options

    return Options(
        dry_run=flags["dry_run"],
        diff=flags["diff"],
        restart=not flags["no_restart"],
        wait=flags["wait"],
        timeout=flags["timeout"],
        max_unavailable=flags["max_unavailable"],
        drain=flags["drain"],
        drain_timeout=flags["drain_timeout"],
        force=flags["force"],
        yes=flags["yes"],
        namespace=settings.namespace,
        configmap=flags["configmap"],
        selector=selector,
    )


def _show_progress(settings: Settings) -> None:
    """Progress of a rollout is the command's output on stderr, not debug chatter."""
    if settings.verbosity == 0:
        logging.getLogger("kubectl_gpu.workflows").setLevel(logging.INFO)


def _showing_findings(function: F, *args: Any) -> Any:
    """Call a workflow; a refused config's findings are printed before the error line."""
    try:
        return function(*args)
    except ConfigError as e:
        for finding in e.findings:
            click.echo(render.format_finding(finding), err=True)  # type: ignore[arg-type]
        raise
