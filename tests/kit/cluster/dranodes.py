"""GPU nodes served by NVIDIA's DRA driver instead of its device plugin, for the simulated cluster.

Owns `--dra-nodes NAME=MODEL:COUNT`: each becomes a GPU node (`NodeSpec(dra=True)`) whose GPUs
are in its driver root's NVML state like any simulated GPU node's, which runs NVIDIA's DRA
kubelet plugin (tests/kit/node/draplugin.py) instead of a device plugin: the plugin publishes
the node's ResourceSlices itself, and Kubernetes' own scheduler allocates claims from them. Also
`start`: what NVIDIA's chart installs, then the plugins, until each node's slices are there.
Must not publish slices or allocate.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tests.kit.cluster import drachart
from tests.kit.node.nodes import NodeSpec

if TYPE_CHECKING:
    from tests.kit.node.draplugin import DraPluginRuntime

Obj = dict[str, Any]
PUBLISH_TIMEOUT = 60.0

_SPEC = re.compile(r"^(?P<name>[a-z0-9.-]+)=(?P<model>[A-Za-z0-9-]+):(?P<count>[1-8])$")


def parse(text: str) -> list[NodeSpec]:
    """`dra-a=A100-SXM4-80GB:2,…` → the DRA nodes to simulate (a libnvml model key each)."""
    nodes = []
    for item in (part.strip() for part in text.split(",") if part.strip()):
        found = _SPEC.match(item)
        if not found:
            raise ValueError(f"--dra-nodes wants NAME=MODEL:COUNT (1-8 GPUs), got {item!r}")
        nodes.append(NodeSpec(found["name"], found["model"], int(found["count"]), dra=True))
    return nodes


def start(
    runtime: DraPluginRuntime, create: Callable[[Obj], None], slices: Callable[[str], list[Obj]]
) -> None:
    """What NVIDIA's chart installs (its classes, the plugin's account and role), then a plugin
    on each DRA node; return once each registered with its kubelet and then published its
    ResourceSlices (`slices("resourceslices")` lists them)."""
    chart = [*drachart.kubelet_plugin_rbac(runtime.feature_gates), *drachart.device_classes()]
    for obj in chart:
        create(obj)
    runtime.start()
    runtime.wait_registered()
    deadline = time.monotonic() + PUBLISH_TIMEOUT
    waiting = set(runtime.sides)
    while waiting and time.monotonic() < deadline:
        waiting -= {s["spec"].get("nodeName") for s in slices("resourceslices")}
        time.sleep(0.1 if waiting else 0)
    if waiting:
        raise RuntimeError(f"NVIDIA's DRA plugin published no ResourceSlice for {sorted(waiting)}")
