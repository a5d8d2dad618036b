"""GPU nodes served by NVIDIA's DRA driver instead of its device plugin, for the simulated cluster.

Owns `--dra-nodes NAME=MODEL:COUNT`: each such node is registered like a kubelet would (CPU and
memory, no `nvidia.com/gpu` capacity, none of the labels our DaemonSets select), and the driver's
DeviceClasses and each node's ResourceSlices (dradriver.py) are published. Claims are then
allocated by whoever schedules: on the real control plane, Kubernetes' own scheduler. Must not
allocate.
"""

from __future__ import annotations

import re
import uuid
from typing import Any, Protocol

from tests.fakes.cluster import dradriver
from tests.kube.objects import node as sample_node

Obj = dict[str, Any]
_UUIDS = uuid.UUID("5d0f3a4e-1c2b-4e6f-8a9d-7b3c2e1f0a94")
_SPEC = re.compile(r"^(?P<name>[a-z0-9.-]+)=(?P<model>[A-Za-z0-9-]+):(?P<count>[1-8])$")


class Creates(Protocol):
    def create(self, obj: Obj) -> Obj: ...


def parse(text: str) -> dict[str, list[dradriver.DraGpu]]:
    """`dra-a=A100-SXM4-80GB:2,…` → each node's GPUs (memory from the model's `…NNGB`)."""
    nodes: dict[str, list[dradriver.DraGpu]] = {}
    for item in (part.strip() for part in text.split(",") if part.strip()):
        found = _SPEC.match(item)
        if not found:
            raise ValueError(f"--dra-nodes wants NAME=MODEL:COUNT (1-8 GPUs), got {item!r}")
        name, model = found["name"], found["model"]
        memory = re.search(r"(\d+)GB$", model)
        nodes[name] = [
            dradriver.DraGpu(
                index,
                f"GPU-{uuid.uuid5(_UUIDS, f'{name}/{index}')}",
                model=f"NVIDIA {model}",
                memory_gib=int(memory[1]) if memory else 80,
            )
            for index in range(int(found["count"]))
        ]
    return nodes


def publish(store: Creates, nodes: dict[str, list[dradriver.DraGpu]], version: str = "v1") -> None:
    """Register the nodes, then the driver's classes and each node's slices."""
    if not nodes:
        return
    for name in nodes:
        obj = sample_node(name, labels={"kubernetes.io/hostname": name})
        obj["status"]["addresses"] = [{"type": "Hostname", "address": name}]
        store.create(obj)
    for obj in dradriver.device_classes(version):
        store.create(obj)
    for name, gpus in nodes.items():
        for obj in dradriver.resource_slices(name, gpus, version):
            store.create(obj)
