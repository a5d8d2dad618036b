"""GPU nodes served by NVIDIA's DRA driver instead of its device plugin, for the simulated cluster.

Owns `--dra-nodes NAME=MODEL:COUNT`: each becomes a GPU node (`NodeSpec(dra=True)`) whose GPUs
are in its driver root's NVML state like any simulated GPU node's, which runs NVIDIA's DRA
kubelet plugin (tests/fakes/node/draplugin.py) instead of a device plugin: the plugin publishes
the node's ResourceSlices itself, and Kubernetes' own scheduler allocates claims from them. Must
not publish slices or allocate.
"""

from __future__ import annotations

import re

from tests.fakes.cluster.nodes import NodeSpec

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
