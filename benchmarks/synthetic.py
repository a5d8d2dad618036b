"""A synthetic GPU cluster for the benchmarks: the objects a fleet benchmark writes into the real
kube-apiserver (benchmarks.populate, benchmarks.rollout, benchmarks.share_scale).

Owns the realistic node mix the scale benchmarks use: 8×H100 nodes (whole GPUs), 8×A100-80GB
nodes with MIG under the `mixed` strategy (half the GPUs `all-1g.10gb`, half `all-balanced`),
and 4×L4 nodes time-sliced 4 ways; one GPUNodeReport per node, built by `gpumap.report.build`
as the agent builds it; and one running pod per held device, spread over the nodes until the
asked-for pod count is reached; Nodes as GFD and the device plugin leave them (product labels,
allocatable). Must not time anything (the callers do), write anything (the callers do) nor be
imported by tests.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator
from typing import Any

from kubectl_gpu.gpumap import join, report
from kubectl_gpu.gpumap.allocations import Allocation, Gpu, MigDevice, Source, group_devices
from tests.kit.kube import objects

NOW = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.timezone.utc)
NAMESPACES = [f"team-{n:02d}" for n in range(50)]
TIME_SLICED = "version: v1\nflags:\n  migStrategy: mixed\n"
BALANCED = (("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1))  # NVIDIA's all-balanced, A100-80GB


@dataclasses.dataclass(frozen=True)
class Kind:
    """One node type of the mix: model, GPUs per node, share of the nodes, time-slice replicas."""

    name: str
    model: str
    product: str
    gpus: int
    share: float
    replicas: int = 1
    mig: bool = False


MIX = (
    Kind("h100", "NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3", 8, 0.45),
    Kind("a100", "NVIDIA A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB", 8, 0.45, mig=True),
    Kind("l4", "NVIDIA L4", "NVIDIA-L4", 4, 0.10, replicas=4),
)


def kind_of(index: int, nodes: int) -> Kind:
    """The node kind at `index`: the mix's shares as contiguous ranges of node indexes."""
    edge = 0.0
    for kind in MIX:
        edge += kind.share * nodes
        if index < round(edge):
            return kind
    return MIX[-1]


def _mig_devices(index: int, gpu: int) -> tuple[MigDevice, ...]:
    layout = (("1g.10gb", 7),) if gpu < 4 else BALANCED
    profiles = [p for p, count in layout for _ in range(count)]
    return tuple(
        MigDevice(f"MIG-{index:08x}-{gpu:04x}-{n:04x}-8000-000000000000", p, n + 1, 0)
        for n, p in enumerate(profiles)
    )


def gpus_of(index: int, kind: Kind) -> list[Gpu]:
    """The node's physical GPUs (with MIG devices on A100 nodes)."""
    return [
        Gpu(
            g,
            f"GPU-{index:08x}-{g:04x}-4000-8000-000000000000",
            kind.model,
            g,
            _mig_devices(index, g) if kind.mig else (),
        )
        for g in range(kind.gpus)
    ]


def devices_of(gpus: list[Gpu], kind: Kind) -> list[tuple[str, str]]:
    """(resource, device ID) for every device the plugin advertises on the node."""
    if kind.mig:
        return [(f"nvidia.com/mig-{m.profile}", m.uuid) for g in gpus for m in g.mig_devices]
    if kind.replicas > 1:
        return [("nvidia.com/gpu", f"{g.uuid}::{r}") for g in gpus for r in range(kind.replicas)]
    return [("nvidia.com/gpu", g.uuid) for g in gpus]


def node_report(index: int, kind: Kind, held: int) -> report.NodeReport:
    """The node's GPUNodeReport with `held` devices allocated, one pod each."""
    name = f"gpu-node-{index:04d}"
    gpus = gpus_of(index, kind)
    devices = devices_of(gpus, kind)
    allocations = tuple(
        Allocation(
            None,
            NAMESPACES[(index + n) % len(NAMESPACES)],
            f"job-{index:04d}-{n:03d}",
            "cuda",
            resource,
            (device,),
            Source.PODRESOURCES,
        )
        for n, (resource, device) in enumerate(devices[:held])
    )
    sources = join.NodeSources(
        podresources=allocations, allocatable=group_devices(devices, Source.PODRESOURCES)
    )
    return report.build(name, gpus, sources, NOW)


def node_object(index: int, kind: Kind) -> dict[str, Any]:
    """The Node as GFD and the device plugin leave it: product labels and GPU allocatable."""
    labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": kind.product,
        "nvidia.com/gpu.count": str(kind.gpus),
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/gpu.replicas": str(kind.replicas),
    }
    obj = objects.node(f"gpu-node-{index:04d}", labels=labels)
    counts: dict[str, int] = {}
    for resource, _device in devices_of(gpus_of(index, kind), kind):
        counts[resource] = counts.get(resource, 0) + 1
    for field in ("capacity", "allocatable"):
        obj["status"][field].update({r: str(c) for r, c in counts.items()})
    return obj


def _capacity(nodes: int) -> list[int]:
    return [len(devices_of(gpus_of(i, kind_of(i, nodes)), kind_of(i, nodes))) for i in range(nodes)]


def held_per_node(nodes: int, pods: int) -> list[int]:
    """Devices held per node: the same fraction of every node's devices, `pods` in all."""
    capacity = _capacity(nodes)
    total = sum(capacity)
    fraction = min(1.0, pods / total) if total else 0.0
    held = [int(c * fraction) for c in capacity]
    short = min(pods, total) - sum(held)
    for i in range(nodes):  # the rounding remainder, one more device on the first nodes
        if short <= 0:
            break
        if held[i] < capacity[i]:
            held[i] += 1
            short -= 1
    return held


def pods_of(built: report.NodeReport) -> Iterator[dict[str, Any]]:
    """A pod bound to the node for each allocation in its report, holding that resource."""
    for a in built.allocations:
        obj = objects.pod(a.pod or "", a.namespace or "default", node_name=built.node, gpus=1)
        obj["spec"]["containers"][0]["resources"] = {"limits": {a.resource: "1"}}
        yield obj
