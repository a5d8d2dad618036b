"""`kubectl gpu install`, `uninstall` and `status`: the node agent and device plugin bundle.

Reads flags, renders the manifests (kubectl_gpu.bundle), calls one workflow function
(kubectl_gpu.workflows.install: install, uninstall, status) and prints one line per object, as
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

from kubectl_gpu.cli import params, render
from kubectl_gpu.cli.render import Column
from kubectl_gpu.cli.settings import Settings, global_options, pass_settings
from kubectl_gpu.errors import GpuError, UsageError

F = Callable[..., Any]
STATUS_COLUMNS = (
    Column("KIND", lambda p: p.kind),
    Column("NAME", lambda p: p.name),
    Column("NAMESPACE", lambda p: p.namespace),
    Column("STATUS", lambda p: p.state),
    Column("DETAIL", lambda p: p.detail),
)
_DEFAULT_NAMESPACE = "kubectl-gpu"


def _dry_run_option(f: F) -> F:
    return params.dry_run_option(
        "client: print what would change (with -o yaml|json: the manifests, offline); "
        "server: let the API server check every object without keeping it."
    )(f)


@click.command(short_help="Install the node agent and device plugin bundle.")
@click.option(
    "--mode",
    type=click.Choice(["bundle", "operator"]),
    help="What to install. operator: only the node agent, beside the device plugin already "
    "running (the GPU Operator's, or a Helm/static one). bundle: the agent and our own NVIDIA "
    "device plugin DaemonSet, configured per node by `kubectl gpu share`. "
    "Default: operator where a device plugin runs, else bundle.",
)
@click.option(
    "--replace-plugin",
    is_flag=True,
    help="With --mode bundle: delete the NVIDIA Helm chart's or static device plugin found, "
    "so that the bundle's runs instead (never the GPU Operator's).",
)
@click.option("--device-plugin-version", metavar="V", help="NVIDIA device plugin release (bundle).")
@click.option("--image", "--agent-image", "agent_image", metavar="IMAGE",
              help="The node agent's image (default: the one this release publishes).")  # fmt: skip
@click.option(
    "--image-pull-policy",
    type=click.Choice(["Always", "IfNotPresent", "Never"]),
    help="For every container of ours (default IfNotPresent).",
)
@click.option(
    "--runtime-class",
    metavar="NAME",
    help="RuntimeClass of our pods (default: the NVIDIA runtime's, found in the cluster; "
    "'' for none, where nvidia is the nodes' default runtime).",
)
@click.option(
    "--operator-namespace",
    metavar="NS",
    help="Where the device plugin runs, for operator mode (default: where it was found).",
)
@_dry_run_option
@global_options
@pass_settings
def install(settings: Settings, dry_run: str, **flags: Any) -> None:
    """Install the node agent (and, in bundle mode, NVIDIA's device plugin); running it again
    changes nothing.

    First checks the cluster and stops before writing anything when a problem is found: a
    device plugin already running (never a second one: beside the GPU Operator the agent only;
    beside a Helm or static plugin, --mode operator or --mode bundle --replace-plugin), a
    missing namespace or RuntimeClass, Kubernetes older than 1.30, GPU nodes our DaemonSets
    would not select. Then creates our namespace (-n, default kubectl-gpu, Pod Security level
    privileged), the GPUNodeReport CRD, the agent's RBAC and admission policy, our config
    ConfigMaps and the DaemonSets, and removes what an install in another mode left. ConfigMap
    contents written by `kubectl gpu share` or `mig apply` are kept.

    \b
    Examples:
      kubectl gpu install
      kubectl gpu install --mode operator
      kubectl gpu install --mode bundle --replace-plugin
      kubectl gpu install --dry-run=client -o yaml --runtime-class nvidia > kubectl-gpu.yaml
    """
    from kubectl_gpu import bundle, preflight

    request = _request(settings, flags)
    if dry_run == "client" and render.is_data(settings.output):
        # No cluster is read: the flags and the defaults decide (nothing is detected).
        nothing = preflight.Facts(preflight.MIN_VERSION, frozenset(), {})
        objects = bundle.render(preflight.decide(request, nothing).options)
        render.emit_table([], (), settings.output, document=_as_list(objects))
        return
    _install(settings, request, dry_run)


@click.command(short_help="Remove everything `kubectl gpu install` created.")
@click.option("--mode", type=click.Choice(["bundle", "operator"]), help="Default: as installed.")
@click.option(
    "--force",
    is_flag=True,
    help="Uninstall although nodes keep MIG-enabled GPUs that the device plugin left would "
    "serve with migStrategy none.",
)
@_dry_run_option
@global_options
@pass_settings
def uninstall(settings: Settings, mode: str | None, force: bool, dry_run: str) -> None:
    """Delete the agent, the device plugin bundle, RBAC, policy, CRD (and so every report) and
    our namespace, in reverse order; then remove our kubectl-gpu.io/ keys from the nodes, and
    create again the device plugin DaemonSet that `install --replace-plugin` deleted.

    Nodes whose GPUs are still MIG-enabled are named first, with the MIG strategy of the
    device plugin left; where it is `none` (it would hand out whole GPUs CUDA cannot use),
    nothing is deleted unless --force: turn MIG off first (`kubectl gpu mig apply -c
    all-disabled`).

    \b
    Examples:
      kubectl gpu uninstall --dry-run
      kubectl gpu uninstall
    """
    from kubectl_gpu import bundle, cluster
    from kubectl_gpu.workflows.install import replaced, stranded
    from kubectl_gpu.workflows.install import uninstall as workflow
    from kubectl_gpu.workflows.install.objects import read

    api = cluster.connect(settings.kubeconfig, settings.context)
    namespace = settings.namespace or _DEFAULT_NAMESPACE
    live = read(api, {"kind": "Namespace", "metadata": {"name": namespace}})
    found = bundle.recorded(live)
    options = found[1] if found else bundle.Options(namespace=namespace)
    if mode is not None:
        options = dataclasses.replace(options, mode=cast("bundle.Mode", mode))
    objects = bundle.render(options)
    kept = replaced.kept_plugins(api, options.namespace)  # read before the namespace goes
    stranded.check(api, objects, kept, force)  # before the first delete, dry run or not
    outcomes = workflow.uninstall(api, objects, dry_run)  # type: ignore[arg-type]
    try:
        outcomes += replaced.restore(api, kept, dry_run)  # type: ignore[arg-type]
    finally:
        _emit(outcomes, settings, dry_run)


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
    from kubectl_gpu.workflows.install import status as install_status

    api = cluster.connect(settings.kubeconfig, settings.context)
    found = install_status.status(api, settings.namespace or _DEFAULT_NAMESPACE)
    output = "table" if settings.output == "wide" else settings.output
    document = {"apiVersion": render.API_VERSION, "kind": "InstallStatus", **found.to_dict()}
    render.emit_table(found.parts, STATUS_COLUMNS, output, document, name=_part_name)
    _summarise(found)


def _part_name(part: Any) -> str:
    return f"{part.kind.lower()}/{part.name}"


def _summarise(found: Any) -> None:
    if found.gpu_nodes_not_selected:
        render.say("GPU nodes our DaemonSets do not select: "
                   f"{', '.join(found.gpu_nodes_not_selected)} (label them "
                   "nvidia.com/gpu.present=true, or run NFD or GFD)", err=True)  # fmt: skip
    if not found.gpu_nodes:
        render.say("our DaemonSets' node affinity matches no node: no node has NFD's, GFD's or "
                   "the nvidia.com/gpu.present label", err=True)  # fmt: skip
    if found.nodes_without_report:
        render.say(f"GPU nodes without an agent report: {', '.join(found.nodes_without_report)}",
                   err=True)  # fmt: skip
    for node, reason in found.nodes_without_gpus:
        render.say(f"node {node}: {reason}", err=True)
    bad = [p for p in found.parts if p.state != "ok"]
    if not found.installed_version:
        raise GpuError(
            f"kubectl-gpu is not installed in namespace {found.namespace}",
            hint=f"`kubectl gpu install` installs it in {found.mode} mode here "
            f"({len(found.parts)} parts; `kubectl gpu install --dry-run` lists them)",
        )
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


def _request(settings: Settings, flags: dict[str, Any]) -> Any:
    from kubectl_gpu import bundle, preflight

    given = {k: flags[k] for k in ("device_plugin_version", "agent_image", "image_pull_policy")
             if flags.get(k) is not None}  # fmt: skip
    for key in ("mode", "operator_namespace", "runtime_class"):
        if flags.get(key):
            given[key] = flags[key]
    options = bundle.check(bundle.Options(namespace=settings.namespace or _DEFAULT_NAMESPACE,
                                          **given))  # fmt: skip
    if flags.get("replace_plugin") and flags.get("mode") != "bundle":
        raise UsageError("--replace-plugin goes with --mode bundle",
                         hint="kubectl gpu install --mode bundle --replace-plugin")  # fmt: skip
    return preflight.Request(
        options,
        mode=flags.get("mode"),
        runtime_class=flags.get("runtime_class"),
        operator_namespace=flags.get("operator_namespace"),
        replace_plugin=bool(flags.get("replace_plugin")),
    )


def _install(settings: Settings, request: Any, dry_run: str) -> None:
    from kubectl_gpu import cluster, preflight
    from kubectl_gpu.workflows.install import facts
    from kubectl_gpu.workflows.install import install as workflow

    api = cluster.connect(settings.kubeconfig, settings.context)
    plan = preflight.decide(request, facts.facts(api, request.options.namespace))
    for note in plan.notes:
        render.say(note, err=True)
    for warning in plan.warnings:
        render.say(f"warning: {warning}", err=True)
    workflow.check(plan)
    _emit(workflow.install(api, plan, dry_run), settings, dry_run)  # type: ignore[arg-type]


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
        render.say(f"{o.ref}{where} {o.action}{suffix}")


def _as_list(objects: list[Any]) -> dict[str, Any]:
    """One document `kubectl apply -f -` takes, as `kubectl get -o yaml` prints several."""
    return {"apiVersion": "v1", "kind": "List", "items": objects}
