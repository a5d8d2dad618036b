"""The project's own stand-in for NVIDIA's DRA driver (gpu.nvidia.com): the DeviceClasses its Helm
chart installs and ResourceSlices in the shape of each served `resource.k8s.io` version.

Not what an end-to-end test of a v1 cluster runs: the simulated cluster's DRA nodes run NVIDIA's
own kubelet plugin v0.4.1 (tests/kit/node/draplugin.py). Kept only where that plugin cannot
serve: the served-version tests at v1beta2 and v1beta1 (v0.4.1 writes v1 only), consumable
capacity (`allowMultipleAllocations`, which v0.4.1 does not publish), unit tests on plain
objects, and the fleet benchmark's thousands of nodes. docs/simulated-dra.md lists where its
shape differs from NVIDIA's (MIG device names and capacities, attributes, counters).

Owns the published shapes, per served `resource.k8s.io` version: v1beta1 keeps device
fields under `basic:`, v1beta2 and v1 do not; the chart's `gpu.nvidia.com` class carries
`extendedResourceName: nvidia.com/gpu` only on v1 (KEP-5004). A node's GPUs come as whole
GPUs (`type: gpu`, optionally `allowMultipleAllocations` with a `memory` capacity: consumable
shares), or as MIG devices of a partitionable GPU drawing on one counter set per GPU
(memory, multiprocessors), as the driver's DynamicMIG mode publishes them. Attribute names and
values follow the driver's deviceinfo.go and mig.go (`type`, `uuid`, `parentUUID`, `profile`,
`productName`, `brand`, `architecture`, `driverVersion`; no index: the driver publishes none).
Must not allocate (that is `drascheduler`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tests.kit.kube.client import ByName

Obj = dict[str, Any]
DRIVER = "gpu.nvidia.com"
GROUP = "resource.k8s.io"


@dataclasses.dataclass(frozen=True)
class MigSlot:
    """One MIG device a partitionable GPU offers: profile, UUID, and what it takes."""

    profile: str
    uuid: str
    memory_gib: int
    multiprocessors: int


@dataclasses.dataclass(frozen=True)
class DraGpu:
    """A physical GPU as the driver sees it."""

    index: int
    uuid: str
    model: str = "NVIDIA A100-SXM4-80GB"
    memory_gib: int = 80
    multiprocessors: int = 98
    shareable: bool = False  # consumable capacity: several claims may share it
    migs: tuple[MigSlot, ...] = ()  # non-empty: published as MIG partitions only


def device_classes(version: str) -> list[Obj]:
    """The chart's DeviceClasses (deviceclass-gpu.yaml, deviceclass-mig.yaml)."""
    found = []
    for name, kind in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig")):
        spec: Obj = {
            "selectors": [
                {
                    "cel": {
                        "expression": f"device.driver == '{DRIVER}' && "
                        f"device.attributes['{DRIVER}'].type == '{kind}'"
                    }
                }
            ]
        }
        if kind == "gpu" and version == "v1":
            spec["extendedResourceName"] = "nvidia.com/gpu"
        found.append(
            {
                "apiVersion": f"{GROUP}/{version}",
                "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": spec,
            }
        )
    return found


def resource_slices(node: str, gpus: list[DraGpu], version: str) -> list[Obj]:
    """The node's pool: a slice of devices and, where GPUs are partitionable, a second slice
    holding their counter sets (the API server refuses `sharedCounters` beside `devices` in
    one slice since Kubernetes 1.36: "only one of `sharedCounters` or `devices` is allowed")."""
    counters = [_counter_set(gpu) for gpu in gpus if gpu.migs]
    count = 2 if counters else 1
    slices = [resource_slice(node, gpus, version, count)]
    if counters:
        slices.append(
            _slice(node, f"{node}-{DRIVER}-counters", version, count, sharedCounters=counters)
        )
    return slices


def resource_slice(node: str, gpus: list[DraGpu], version: str, pool_slices: int = 1) -> Obj:
    """The node's devices: whole GPUs, or the MIG partitions of a partitionable GPU."""
    devices: list[Obj] = []
    for gpu in gpus:
        if gpu.migs:
            devices += [_mig_device(gpu, slot, n) for n, slot in enumerate(gpu.migs)]
        else:
            devices.append(_gpu_device(gpu))
    return _slice(
        node, f"{node}-{DRIVER}-sim", version, pool_slices,
        devices=[_versioned(d, version) for d in devices],
    )  # fmt: skip


def _slice(node: str, name: str, version: str, pool_slices: int, **content: Any) -> Obj:
    spec: Obj = {
        "driver": DRIVER,
        "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": pool_slices},
        **content,
    }
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": spec,
    }


def install(store: ByName, nodes: dict[str, list[DraGpu]], version: str = "v1") -> None:
    """Publish the chart's classes and each node's slice into `store`."""
    for obj in device_classes(version):
        store.create(obj)
    for node, gpus in nodes.items():
        for obj in resource_slices(node, gpus, version):
            store.create(obj)


def _gpu_device(gpu: DraGpu) -> Obj:
    device: Obj = {
        "name": f"gpu-{gpu.index}",
        "attributes": _attributes(gpu, "gpu", gpu.uuid),
        "capacity": {"memory": {"value": f"{gpu.memory_gib}Gi"}},
    }
    if gpu.shareable:
        device["allowMultipleAllocations"] = True
    return device


def _mig_device(gpu: DraGpu, slot: MigSlot, position: int) -> Obj:
    attributes = _attributes(gpu, "mig", slot.uuid)
    attributes["parentUUID"] = {"string": gpu.uuid}
    attributes["profile"] = {"string": slot.profile}
    name = f"gpu-{gpu.index}-mig-{slot.profile.replace('.', '')}-{position}"
    return {
        "name": name,
        "attributes": attributes,
        "capacity": {"memory": {"value": f"{slot.memory_gib}Gi"}},
        "consumesCounters": [
            {
                "counterSet": _set_name(gpu),
                "counters": {
                    "memory": {"value": f"{slot.memory_gib}Gi"},
                    "multiprocessors": {"value": str(slot.multiprocessors)},
                },
            }
        ],
    }


def _counter_set(gpu: DraGpu) -> Obj:
    return {
        "name": _set_name(gpu),
        "counters": {
            "memory": {"value": f"{gpu.memory_gib}Gi"},
            "multiprocessors": {"value": str(gpu.multiprocessors)},
        },
    }


def _set_name(gpu: DraGpu) -> str:
    return f"gpu-{gpu.index}-counter-set"


def _attributes(gpu: DraGpu, kind: str, uuid: str) -> Obj:
    return {
        "type": {"string": kind},
        "uuid": {"string": uuid},
        "productName": {"string": gpu.model},
        "brand": {"string": "Nvidia"},
        "architecture": {"string": "Ampere"},
        "driverVersion": {"version": "580.65.6"},
    }


def _versioned(device: Obj, version: str) -> Obj:
    if version != "v1beta1":
        return device
    fields = {k: v for k, v in device.items() if k != "name"}
    return {"name": device["name"], "basic": fields}
