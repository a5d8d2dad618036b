"""A simulated Kubernetes cluster with NVIDIA GPU nodes (test code only).

Owns nothing itself; it names the public pieces: `SimCluster` (a real control plane with the
node side simulated: kubelet device allocation, NVIDIA's own device plugin and GFD, the GPU
Operator, the agent processes), `NodeSpec`, the deployment `layouts` and `Allocation`. Tests use
the `sim_cluster` fixture (`fixture.py`, registered by tests/conftest.py); `python -m
tests.kit.cluster` starts one for a demo. The top floor of the kit: nothing in it imports this.
"""

from __future__ import annotations

from tests.kit.cluster.cluster import ALL_CONTROLLERS, ClusterError, SimCluster
from tests.kit.kube.layouts import LAYOUTS, Layout
from tests.kit.node.allocation import Allocation
from tests.kit.node.nodes import NodeSpec

__all__ = [
    "ALL_CONTROLLERS",
    "LAYOUTS",
    "Allocation",
    "ClusterError",
    "Layout",
    "NodeSpec",
    "SimCluster",
]
