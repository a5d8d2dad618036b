"""A simulated NVIDIA DRA driver (gpu.nvidia.com): the DeviceClasses its Helm chart installs
and the ResourceSlice its kubelet plugin publishes for each node it runs on.

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
import json
from typing import Any

from tests.fakes.apiserver import Store

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


def resource_slice(node: str, gpus: list[DraGpu], version: str) -> Obj:
    """The node's one ResourceSlice: its devices, and a counter set per partitionable GPU."""
    devices: list[Obj] = []
    counters: list[Obj] = []
    for gpu in gpus:
        if gpu.migs:
            counters.append(_counter_set(gpu))
            devices += [_mig_device(gpu, slot, n) for n, slot in enumerate(gpu.migs)]
        else:
            devices.append(_gpu_device(gpu))
    spec: Obj = {
        "driver": DRIVER,
        "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": [_versioned(d, version) for d in devices],
    }
    if counters:
        spec["sharedCounters"] = counters
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}-sim"},
        "spec": spec,
    }


def resource_slices(node: str, gpus: list[DraGpu], version: str) -> list[Obj]:
    """The node's pool as a real API server takes it: since partitionable devices moved their
    counter sets into slices of their own (KEP-4815), a slice holds either `sharedCounters`
    or `devices`, so a node with MIG partitions publishes two slices in one pool."""
    whole = resource_slice(node, gpus, version)
    counters = whole["spec"].pop("sharedCounters", None)
    if not counters:
        return [whole]
    whole["spec"]["pool"]["resourceSliceCount"] = 2
    shared = json.loads(json.dumps(whole))
    del shared["spec"]["devices"]
    shared["spec"]["sharedCounters"] = counters
    shared["metadata"]["name"] += "-counters"
    return [shared, whole]


def install(store: Store, nodes: dict[str, list[DraGpu]], version: str = "v1") -> None:
    """Publish the chart's classes and each node's slices into `store`."""
    for obj in device_classes(version):
        store.create(obj)
    for node, gpus in nodes.items():
        for piece in resource_slices(node, gpus, version):
            store.create(piece)


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
