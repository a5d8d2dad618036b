"""One reporting pass of the agent: read the node's GPU facts and publish them on change.

Reading costs the API server nothing (NVML and kubelet are local): the agent looks every
interval and writes only when the digest changed.

Owns gathering NVML's inventory, kubelet's checkpoint and PodResources for this node and
handing them to `gpumap.report.build` and `workflows.reports.publish`. Each source may
fail on its own (kubelet restarting, NVML not ready): the report is still published from
what could be read, with the failure logged, as kubelet itself carries on without its
checkpoint. Must not decide what the rows are (the gpumap join does).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from pathlib import Path

from kubectl_gpu import cluster, kubelet, nvml
from kubectl_gpu.errors import DeviceError, KubeletError
from kubectl_gpu.gpumap import report
from kubectl_gpu.gpumap.join import NodeSources
from kubectl_gpu.workflows import reports

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Sources:
    """Where this node's facts are: kubelet's root directory (checkpoint, socket)."""

    node: str
    kubelet_root: Path = kubelet.DEFAULT_ROOT
    timeout: float = kubelet.DEFAULT_TIMEOUT


@dataclasses.dataclass(frozen=True)
class Published:
    """The digest of the report now stored, and the GPUs NVML showed: a change of those
    (someone changed MIG by hand) calls for a reconcile pass, a change of pods does not."""

    digest: str
    gpus: tuple[report.InventoryGpu, ...]


def publish(api: cluster.Api, sources: Sources, previous_digest: str | None) -> Published:
    """Build this node's report and write it if it changed (no request at all when its digest
    is `previous_digest`)."""
    inventory, problem = read_inventory()
    node_report = report.build(
        sources.node,
        inventory,
        read_node_sources(sources),
        dt.datetime.now(dt.timezone.utc),
        inventory_error=problem,
    )
    return Published(reports.publish(api, node_report, previous_digest), node_report.gpus)


def read_inventory() -> tuple[list[report.InventoryGpu] | None, str | None]:
    """The node's GPUs and MIG devices from NVML; None and the reason when NVML cannot be
    read (the report says so, rather than showing a node without GPUs)."""
    try:
        with nvml.session() as device:
            return device.inventory(), None
    except DeviceError as e:
        log.warning("report without a GPU inventory: %s", e.message)
        return None, e.message


def read_node_sources(sources: Sources) -> NodeSources:
    """kubelet's checkpoint and PodResources answers; a source that fails is left out."""
    contents = kubelet.read_checkpoint(kubelet.checkpoint_path(sources.kubelet_root))
    for warning in contents.warnings:
        log.warning("%s", warning)
    socket = kubelet.socket_path(sources.kubelet_root)
    try:
        podresources = kubelet.list_pod_resources(socket, sources.timeout)
        allocatable = kubelet.allocatable_resources(socket, sources.timeout)
    except KubeletError as e:
        log.warning("report without PodResources: %s", e.message)
        podresources, allocatable = None, None
    return NodeSources(
        node=sources.node,
        checkpoint=contents.allocations,
        registered=contents.registered if contents.readable else None,
        podresources=podresources,
        allocatable=allocatable,
    )
