"""Builders for map tests: GPUs, allocations, reports published to a real API server, DRA objects.

Owns small constructors that keep the tests about behaviour: a node's inventory, PodResources
allocations, `publish_node` (build a node's report from its sources with `report.build` and
publish it with `workflows.reports.publish`, as the agent will), and resource.k8s.io/v1
ResourceClaim / ResourceSlice / Pod objects shaped like NVIDIA's DRA driver's. Must not assert.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kubectl_gpu import cluster
from kubectl_gpu.errors import ClusterError
from kubectl_gpu.gpumap import join, report
from kubectl_gpu.gpumap.allocations import (
    Allocation,
    Gpu,
    MigDevice,
    RegisteredDevices,
    Source,
    group_devices,
)
from kubectl_gpu.workflows import reports
from tests.gpumap.test_report_crd_matches_the_schema import crd
from tests.kit.kube import objects

if TYPE_CHECKING:
    from tests.kit.cluster import SimCluster

NOW = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.timezone.utc)
L4 = "NVIDIA L4"
A100 = "NVIDIA A100-SXM4-40GB"
Obj = dict[str, Any]


def uuid(prefix: str, n: int) -> str:
    return f"{prefix}-{n:08x}-1111-2222-3333-444444444444"


def gpus(count: int, model: str = L4, node: int = 0) -> list[Gpu]:
    return [Gpu(i, uuid("GPU", node * 100 + i), model, i) for i in range(count)]


def mig_gpu(index: int, profiles: Sequence[str], node: int = 0) -> Gpu:
    migs = tuple(
        MigDevice(uuid("MIG", node * 100 + index * 10 + j), p, j + 1, 0)
        for j, p in enumerate(profiles)
    )
    return Gpu(index, uuid("GPU", node * 100 + index), A100, index, migs)


def held(
    pod: str, device_ids: Sequence[str], resource: str = "nvidia.com/gpu", namespace: str = "ml"
) -> Allocation:
    return Allocation(
        None, namespace, pod, "cuda", resource, tuple(device_ids), Source.PODRESOURCES
    )


def healthy(devices: dict[str, Sequence[str]]) -> RegisteredDevices:
    pairs = [(resource, i) for resource, ids in devices.items() for i in ids]
    return group_devices(pairs, Source.PODRESOURCES)


def install(api: cluster.Api) -> None:
    """The CRD, as `kubectl apply -f` of the shipped manifest would create it; returns once it
    is served (a real API server establishes a new CRD a moment after the create)."""
    document = crd()
    api.create(cluster.path("customresourcedefinitions"), document)
    group, plural = document["spec"]["group"], document["spec"]["names"]["plural"]
    version = document["spec"]["versions"][0]["name"]
    deadline = time.monotonic() + 20
    while True:
        try:
            api.get(f"/apis/{group}/{version}/{plural}")
            return
        except ClusterError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def add_node(sim: SimCluster, name: str, gpu: bool = True) -> None:
    sim.client.create(node(name, gpu))


def node(name: str, gpu: bool = True) -> Obj:
    """A Ready node; a GPU node carries GFD's gpu.present label."""
    return objects.node(name, labels={"nvidia.com/gpu.present": "true"} if gpu else {})


def publish_node(
    api: cluster.Api,
    node: str,
    inventory: Sequence[Gpu],
    allocations: Sequence[Allocation],
    allocatable: RegisteredDevices | None = None,
) -> str:
    """Build the node's report as the agent does and publish it; return the digest."""
    sources = join.NodeSources(podresources=tuple(allocations), allocatable=allocatable)
    built = report.build(node, inventory, sources, NOW)
    return reports.publish(api, built, None)


# --- DRA (resource.k8s.io/v1, NVIDIA's gpu.nvidia.com driver) -----------------------------------


def resource_slice(node: str, devices: Sequence[Obj]) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu.nvidia.com-x7k2p"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "nodeName": node,
            "devices": list(devices),
        },
    }


def gpu_device(name: str, gpu_uuid: str, model: str = A100) -> Obj:
    return {
        "name": name,
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": gpu_uuid},
            "productName": {"string": model},
            "driverVersion": {"version": "580.65.6"},
        },
        "capacity": {"memory": {"value": "40Gi"}},
    }


def mig_device(name: str, mig_uuid: str, parent: str, profile: str) -> Obj:
    return {
        "name": name,
        "attributes": {
            "type": {"string": "mig"},
            "uuid": {"string": mig_uuid},
            "parentUUID": {"string": parent},
            "profile": {"string": profile},
            "productName": {"string": A100},
        },
    }


def claim(name: str, namespace: str, node: str, devices: Sequence[str], pod: str | None) -> Obj:
    reserved = [{"resource": "pods", "name": pod, "uid": f"uid-{pod}"}] if pod else []
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": d}
                        for d in devices
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [node]}
                            ]
                        }
                    ]
                },
            },
            "reservedFor": reserved,
        },
    }


def claim_pod(name: str, namespace: str, node: str, claim_name: str, container: str) -> Obj:
    """A pod whose container uses a claim made from a template (named in the pod's status)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {
            "nodeName": node,
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            "containers": [
                {"name": container, "image": "cuda:12", "resources": {"claims": [{"name": "gpu"}]}},
                {"name": "sidecar", "image": "busybox"},
            ],
        },
        "status": {
            "phase": "Running",
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim_name}],
        },
    }
