"""`kubectl gpu install`, `uninstall` and `status`: the node agent and device plugin bundle.

Reads flags, renders the manifests (kubectl_gpu.bundle), calls one workflow function
(kubectl_gpu.workflows.install / install_status) and prints one line per object, as
`kubectl apply` does. `install --dry-run=client -o yaml` prints the manifests without
contacting the cluster. The cluster adapter and workflows are imported inside the commands so
that `--help` stays light. Exit 0 on success, 1 when `status` finds a part missing, not Ready
or outdated, or a node without a report; 2 for usage.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, cast

import click

from kubectl_gpu.cli import render
from kubectl_gpu.cli.render import Column
from kubectl_gpu.cli.settings import Settings, global_options, pass_settings
from kubectl_gpu.errors import GpuError

F = Callable[..., Any]
OUTCOME_COLUMNS = (
    Column("OBJECT", lambda o: o.ref),
    Column("NAMESPACE", lambda o: o.namespace),
    Column("RESULT", lambda o: o.action),
)
STATUS_COLUMNS = (
    Column("KIND", lambda p: p.kind),
    Column("NAME", lambda p: p.name),
    Column("NAMESPACE", lambda p: p.namespace),
    Column("STATUS", lambda p: p.state),
    Column("DETAIL", lambda p: p.detail),
)
_DEFAULT_NAMESPACE = "kubectl-gpu"


def _dry_run_option(f: F) -> F:
    return click.option(
        "--dry-run",
        type=click.Choice(["none", "client", "server"]),
        default="none",
        is_flag=False,
        flag_value="client",
        help="client: print what would change (with -o yaml|json: the manifests, offline); "
        "server: let the API server check every object without keeping it.",
    )(f)


@click.command(short_help="Install the node agent and device plugin bundle.")
@click.option(
    "--mode",
    type=click.Choice(["bundle", "operator"]),
    default="bundle",
    show_default=True,
    help="bundle: also NVIDIA's device plugin, configured per node; operator: only the agent, "
    "beside the GPU Operator's device plugin and MIG manager.",
)
@click.option("--device-plugin-version", metavar="V", help="NVIDIA device plugin release (bundle).")
@click.option("--agent-image", metavar="IMAGE", help="The node agent's image.")
@click.option(
    "--operator-namespace",
    metavar="NS",
    help="The GPU Operator's namespace (operator mode; default gpu-operator).",
)
@_dry_run_option
@global_options
@pass_settings
def install(settings: Settings, dry_run: str, **flags: Any) -> None:
    """Install the node agent and device plugin bundle; running it again changes nothing.

    Creates our namespace (-n, default kubectl-gpu), the GPUNodeReport CRD, the agent's
    least-privilege RBAC and admission policy, our config ConfigMaps and the DaemonSets. Existing
    objects are updated only where they differ; ConfigMap contents written by `kubectl gpu share`
    or `mig apply` are kept.

    \b
    Examples:
      kubectl gpu install
      kubectl gpu install --mode operator
      kubectl gpu install --dry-run=client -o yaml > kubectl-gpu.yaml
    """
    from kubectl_gpu import bundle

    objects = bundle.render(_options(settings, flags))
    if dry_run == "client" and render.is_data(settings.output):
        render.emit_table([], (), settings.output, document=_as_list(objects))
        return
    _apply(settings, objects, dry_run)


@click.command(short_help="Remove everything `kubectl gpu install` created.")
@click.option("--mode", type=click.Choice(["bundle", "operator"]), help="Default: as installed.")
@_dry_run_option
@global_options
@pass_settings
def uninstall(settings: Settings, mode: str | None, dry_run: str) -> None:
    """Delete the agent, the device plugin bundle, RBAC, policy, CRD (and so every report) and
    our namespace, in reverse order; then remove our kubectl-gpu.io/ keys from the nodes.

    \b
    Examples:
      kubectl gpu uninstall --dry-run
      kubectl gpu uninstall
    """
    from kubectl_gpu import bundle, cluster
    from kubectl_gpu.workflows import install as workflow

    api = cluster.connect(settings.kubeconfig, settings.context)
    namespace = settings.namespace or _DEFAULT_NAMESPACE
    live = workflow.read(api, {"kind": "Namespace", "metadata": {"name": namespace}})
    found = bundle.recorded(live)
    options = found[1] if found else bundle.Options(namespace=namespace)
    if mode is not None:
        options = dataclasses.replace(options, mode=cast("bundle.Mode", mode))
    objects = bundle.render(options)
    _emit(workflow.uninstall(api, objects, dry_run), settings, dry_run)  # type: ignore[arg-type]


@click.command(short_help="Show whether every part of the install is there and Ready.")
@global_options
@pass_settings
def status(settings: Settings) -> None:
    """Check every installed object, the DaemonSets on every GPU node, versions, and which GPU
    nodes have no agent report. Exit 1 when anything is not as installed.

    \b
    Examples:
      kubectl gpu status
      kubectl gpu status -o json
    """
    from kubectl_gpu import cluster
    from kubectl_gpu.workflows import install_status

    api = cluster.connect(settings.kubeconfig, settings.context)
    found = install_status.status(api, settings.namespace or _DEFAULT_NAMESPACE)
    output = "table" if settings.output == "wide" else settings.output
    document = {"apiVersion": render.API_VERSION, "kind": "InstallStatus", **found.to_dict()}
    render.emit_table(found.parts, STATUS_COLUMNS, output, document, name=_part_name)
    _summarise(found)


def _part_name(part: Any) -> str:
    return f"{part.kind.lower()}/{part.name}"


def _summarise(found: Any) -> None:
    if found.nodes_without_report:
        click.echo(f"GPU nodes without an agent report: {', '.join(found.nodes_without_report)}",
                   err=True)  # fmt: skip
    for node, reason in found.nodes_without_gpus:
        click.echo(f"node {node}: {reason}", err=True)
    bad = [p for p in found.parts if p.state != "ok"]
    if found.healthy:
        click.echo(
            f"kubectl-gpu {found.installed_version} ({found.mode}): all {len(found.parts)} "
            f"parts ready on {len(found.gpu_nodes)} GPU nodes",
            err=True,
        )
        return
    raise GpuError(
        f"{len(bad)} of {len(found.parts)} parts not ready, "
        f"{len(found.nodes_without_report)} GPU node(s) without a report, "
        f"{len(found.nodes_without_gpus)} whose agent cannot read the GPUs",
        hint="run `kubectl gpu install` to repair, or see the DETAIL column",
    )


def _options(settings: Settings, flags: dict[str, Any]) -> Any:
    from kubectl_gpu import bundle

    given = {k: v for k, v in flags.items() if v is not None}
    return bundle.check(bundle.Options(namespace=settings.namespace or _DEFAULT_NAMESPACE, **given))


def _apply(settings: Settings, objects: list[Any], dry_run: str) -> None:
    from kubectl_gpu import cluster
    from kubectl_gpu.workflows import install as workflow

    api = cluster.connect(settings.kubeconfig, settings.context)
    _emit(workflow.apply(api, objects, dry_run), settings, dry_run)  # type: ignore[arg-type]


def _emit(outcomes: Sequence[Any], settings: Settings, dry_run: str) -> None:
    suffix = {"client": " (dry run)", "server": " (server dry run)"}.get(dry_run, "")
    if render.is_data(settings.output):
        document = [{**dataclasses.asdict(o), "dryRun": dry_run != "none"} for o in outcomes]
        render.emit_table([], (), settings.output, render.list_document("InstallResult", document))
        return
    if settings.output == "name":
        render.emit_table(outcomes, (), "name", name=lambda o: o.ref)
        return
    for o in outcomes:
        where = f" -n {o.namespace}" if o.namespace else ""
        click.echo(f"{o.ref}{where} {o.action}{suffix}")


def _as_list(objects: list[Any]) -> dict[str, Any]:
    """One document `kubectl apply -f -` takes, as `kubectl get -o yaml` prints several."""
    return {"apiVersion": "v1", "kind": "List", "items": objects}
