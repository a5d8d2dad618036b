"""`kubectl gpu map`: which pod and container hold which GPU, MIG device and replica.

Owns the command line of `map` (its table columns are `cli.mapcolumns`). From the cluster
(the default) it asks `workflows.map` for every node's GPUNodeReport (written by the node
agent) and the DRA claims, and renders the rows with each report's age; nodes without a
report and the reports' findings go to stderr. Offline (`--checkpoint`) it reads a copy of
one node's kubelet checkpoint (and optionally a pod list), hands them to `gpumap.join`, and
renders the rows. Imports only click and light modules at module level: `map --help` and the
offline map never load `kubernetes` or `grpc` (the cluster path imports `kubectl_gpu.cluster`
inside its function).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import gc
import json
import logging
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kubectl_gpu.cli import inputs, mapcolumns, render
from kubectl_gpu.cli.settings import Settings, global_options, pass_settings
from kubectl_gpu.errors import GpuError, InputError, KubeletError, UsageError, printable
from kubectl_gpu.findings import Finding
from kubectl_gpu.gpumap import allocations, join
from kubectl_gpu.gpumap.clustermap import MapRow
from kubectl_gpu.gpumap.join import Row

if TYPE_CHECKING:
    from kubectl_gpu.gpumap.clustermap import ClusterMap
    from kubectl_gpu.kubelet import CheckpointContents

log = logging.getLogger(__name__)

MAP_KIND = "GPUMap"  # -o json: {apiVersion, kind, items: [rows]} (schemas/map-rows.v1.json)
MAX_PODS_BYTES = 256 * 1024 * 1024  # `kubectl get pods -A -o json` of about 500,000 pods
STDIN = "-"


@dataclasses.dataclass(frozen=True)
class MapRequest:
    """The command's own flags (the global ones are in `Settings`)."""

    nodes: tuple[str, ...]
    selector: str | None
    all_namespaces: bool
    pod: str | None
    checkpoint: str | None
    node_name: str | None
    pods: str | None
    free: bool
    tree: bool


@click.command("map", short_help="Show which pod holds which GPU, MIG device and replica.")
@click.argument("nodes", nargs=-1, metavar="[NODE]...")
@click.option("-l", "--selector", metavar="SELECTOR", help="Map the nodes with these labels.")
@click.option("-A", "--all-namespaces", is_flag=True, help="Show pods of every namespace.")
@click.option("--pod", metavar="NAME", help="Only the devices of this pod (name, ns/name or UID).")
@click.option(
    "--checkpoint",
    metavar="FILE|-",
    help="Map one node from a copy of its kubelet_internal_checkpoint ('-': stdin).",
)
@click.option("--node-name", metavar="NODE", help="The node the checkpoint was copied from.")
@click.option(
    "--pods",
    metavar="FILE|-",
    help="Name pods from `kubectl get pods -A -o json` (a list or one pod).",
)
@click.option("--free", is_flag=True, help="List the devices no container holds, instead.")
@click.option(
    "--tree",
    is_flag=True,
    help="Draw node → GPU → MIG device (placement order) / replica → pod, and the free ones.",
)
@global_options
@pass_settings
def map_(settings: Settings, **flags: Any) -> None:
    """Map physical GPUs and MIG devices to advertised device IDs, replicas and pods.

    Offline, `--checkpoint` reads a copy of a node's kubelet checkpoint
    (/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint), current or pre-1.20
    format. The checkpoint knows pods by UID only: give `--pods` to see their names.
    Without NVML on the node the GPU index and model are unknown, so the UUID shown is the
    one in the device ID; an opaque MIG-<uuid> shows no parent GPU. The checkpoint's checksum
    is not verified. A checkpoint that cannot be read at all is an error (exit 1): offline it
    is the only source.

    From the cluster (without --checkpoint) the map is read from the GPUNodeReport each
    node's agent publishes, plus DRA ResourceClaims and ResourceSlices (at the
    resource.k8s.io version the server serves); PLANE says which handed the GPU out
    (device-plugin or dra), and -o wide adds a DRA allocation's sharing config, share ID and
    its GPU's counters in use. AGE is how long ago the agent last saw the node's allocations
    or devices change. GPU nodes without a report
    are listed on stderr with the reason, as are the problems the agents found.

    \b
    Examples:
      kubectl gpu map -A
      kubectl gpu map gpu-node-1 -o wide
      kubectl gpu map -l nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 --free
      kubectl gpu map gpu-node-1 --tree
      minikube ssh -- sudo cat /var/lib/kubelet/device-plugins/kubelet_internal_checkpoint \\
        | kubectl gpu map --checkpoint -
      kubectl get pods -A -o json > pods.json
      kubectl gpu map --checkpoint node1.json --node-name node1 --pods pods.json -o wide
    """
    request = MapRequest(**flags)
    if request.tree and (request.free or settings.output not in ("table", "wide")):
        raise UsageError(
            "--tree draws held and free devices as a picture: it cannot be combined with "
            f"--free or -o {settings.output}",
            hint="-o json gives every field the picture shows",
        )
    if request.checkpoint is None:
        _map_cluster(request, settings)
        return
    _check(request, settings)
    with _collector_paused():
        _map_checkpoint(request, settings)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off while the offline map is read, built and printed.

    Every allocation, row and finding stays alive until printed, and none forms a cycle, but
    the collector walked them all again and again as they grew: 0.6 s of 2.4 s CPU for
    100,000 checkpoint entries (docs/performance.md). A cycle the command leaves is freed
    when the process ends, or in-process (tests) collected once the collector is back on.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _map_checkpoint(request: MapRequest, settings: Settings) -> None:
    contents = _read_checkpoint(str(request.checkpoint))
    pods = _read_pods(request.pods) if request.pods else ()
    sources = join.NodeSources(
        node=request.node_name, checkpoint=contents.allocations, registered=contents.registered
    )
    node_map = join.make(sources, pods)
    _warn_all(node_map.findings)
    rows = _selected(node_map.free if request.free else node_map.rows, request, settings)
    if request.tree:
        free = node_map.free if _unfiltered(request, settings) else []
        _emit_tree([MapRow(r, None, None) for r in rows], [MapRow(r, None, None) for r in free])
        return
    document = None
    if render.is_data(settings.output):  # 100,000 dicts a table does not print: 0.5 s
        document = render.list_document(MAP_KIND, [row.to_dict() for row in rows])
    render.emit_table(rows, mapcolumns.columns(settings.output), settings.output, document)


def _check(request: MapRequest, settings: Settings) -> None:
    if request.nodes or request.selector:
        raise UsageError("--checkpoint maps the one node it came from; NODE and -l select nodes")
    if request.checkpoint == STDIN and request.pods == STDIN:
        raise UsageError("stdin ('-') can be read only once: give --checkpoint or --pods a file")
    if request.free and request.pod:
        raise UsageError("--free lists devices no pod holds; it cannot be combined with --pod")
    if settings.namespace and not request.all_namespaces and not request.pods:
        raise UsageError(
            "-n needs --pods offline: the checkpoint names pods by UID only",
            hint="add --pods with the output of `kubectl get pods -A -o json`",
        )


def _read_checkpoint(source: str) -> CheckpointContents:
    from kubectl_gpu import kubelet

    if source == STDIN:
        data = sys.stdin.buffer.read(kubelet.MAX_CHECKPOINT_BYTES + 1)
        contents = kubelet.parse_checkpoint(data, "<stdin>")
    else:
        inputs.refuse_special(source)
        contents = kubelet.read_checkpoint(Path(source))
    for warning in contents.warnings:
        log.warning("warning: %s", warning)
    if not contents.readable:
        raise KubeletError(
            "no map: the checkpoint is the only source offline, and it could not be read",
            hint="copy the file again; kubelet rewrites it at its next device allocation",
        )
    return contents


def _read_pods(source: str) -> tuple[allocations.PodRef, ...]:
    name = "<stdin>" if source == STDIN else source
    try:
        if source == STDIN:
            data = sys.stdin.buffer.read(MAX_PODS_BYTES + 1)
        else:
            inputs.refuse_special(source)
            with open(source, "rb") as stream:
                data = stream.read(MAX_PODS_BYTES + 1)
    except OSError as e:
        raise InputError(f"cannot read the pod list {name}: {e.strerror or e}") from e
    if len(data) > MAX_PODS_BYTES:
        raise InputError(f"the pod list {name} is larger than {MAX_PODS_BYTES // 2**20} MiB")
    try:
        document = json.loads(data)
    except ValueError as e:
        raise InputError(
            f"the pod list {name} is not JSON: {e}",
            hint="produce it with `kubectl get pods -A -o json`",
        ) from e
    return allocations.pods_from_document(document, name)


_SAME_KIND_SHOWN = 20  # then one line with the count: 90,000 alike say nothing more


def _warn_all(found: Sequence[Finding]) -> None:
    """Each finding on stderr, at most `_SAME_KIND_SHOWN` of one code, then how many more."""
    counts: dict[str, int] = {}
    for finding in found:
        counts[finding.code] = counts.get(finding.code, 0) + 1
        if counts[finding.code] <= _SAME_KIND_SHOWN:
            _warn(finding)
    for code, count in counts.items():
        if count > _SAME_KIND_SHOWN:
            log.warning("warning: %d more like the above [%s]", count - _SAME_KIND_SHOWN, code)


def _warn(finding: Finding) -> None:
    log.warning("warning: %s [%s]", printable(finding.message), finding.code)
    if finding.hint:
        log.warning("  hint: %s", printable(finding.hint))


def _selected(rows: Sequence[Row], request: MapRequest, settings: Settings) -> list[Row]:
    wanted = [r for r in rows if not request.pod or request.pod in _pod_names(r)]
    if settings.namespace and not request.all_namespaces:
        wanted = [r for r in wanted if r.namespace == settings.namespace]
    return wanted


# --- from the cluster ----------------------------------------------------------------------------


def _map_cluster(request: MapRequest, settings: Settings) -> None:
    _check_cluster(request)
    result = _read_cluster(request, settings)
    for node, finding in result.findings:
        _warn(dataclasses.replace(finding, message=f"node {node}: {finding.message}"))
    from kubectl_gpu.gpumap.clustermap import NO_NODE

    for missing in result.missing:
        if missing.reason != NO_NODE:
            log.warning("node %s: %s", missing.node, missing.reason)
    shown = result.free() if request.free else result.rows
    rows = [r for r in shown if _wanted(r.row, request, settings)]
    if request.tree:
        _emit_tree(rows, result.free() if _unfiltered(request, settings) else ())
    else:
        document = render.list_document(MAP_KIND, [row.to_dict() for row in rows])
        render.emit_table(
            rows, mapcolumns.cluster_columns(settings.output), settings.output, document
        )
    absent = [m.node for m in result.missing if m.reason == NO_NODE]
    if absent:  # as `kubectl get nodes NOSUCH`: the others are shown, the command fails
        raise GpuError(
            "; ".join(f'nodes "{printable(n)}" not found' for n in absent),
            hint="kubectl get nodes lists the node names",
        )


def _unfiltered(request: MapRequest, settings: Settings) -> bool:
    """Whether the tree shows the free devices too: not when it shows one pod's or one
    namespace's devices."""
    return not request.pod and (request.all_namespaces or not settings.namespace)


def _emit_tree(held: Sequence[MapRow], free: Sequence[MapRow]) -> None:
    from kubectl_gpu.cli import maptree

    for line in maptree.lines(held, free):
        click.echo(printable(line))


def _check_cluster(request: MapRequest) -> None:
    offline_only = [
        f for f, v in (("--node-name", request.node_name), ("--pods", request.pods)) if v
    ]
    if offline_only:
        raise UsageError(f"{' and '.join(offline_only)} can only be used with --checkpoint")
    if request.free and request.pod:
        raise UsageError("--free lists devices no pod holds; it cannot be combined with --pod")


def _read_cluster(request: MapRequest, settings: Settings) -> ClusterMap:
    from kubectl_gpu import cluster  # lazy: --help and the offline map never load kubernetes
    from kubectl_gpu.workflows import map as reading

    api = cluster.connect(settings.kubeconfig, settings.context)
    namespace = None if request.all_namespaces else settings.namespace
    scope = reading.Scope(request.nodes, request.selector, namespace)
    return reading.read(api, scope, dt.datetime.now(dt.timezone.utc))


def _wanted(row: Row, request: MapRequest, settings: Settings) -> bool:
    if request.pod and request.pod not in _pod_names(row):
        return False
    return request.all_namespaces or not settings.namespace or row.namespace == settings.namespace


def _pod_names(row: Row) -> tuple[str | None, ...]:
    return (row.pod, row.pod_uid, f"{row.namespace}/{row.pod}")
