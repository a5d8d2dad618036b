"""A simulated Kubernetes cluster with NVIDIA GPU nodes (test code only).

Owns nothing itself; it names the public pieces: `SimCluster` (API server stand-in plus
simulated DaemonSet controller, scheduler, kubelet, NVIDIA device plugin, GFD and GPU Operator),
`NodeSpec`, the deployment `layouts` and `Allocation`. Tests use the `sim_cluster` fixture
(stand-in API server and simulated DaemonSet controller, scheduler and pod lifecycle: for
unit-level tests and fault injection only) or `real_cluster` (a real control plane, only the
node side simulated: end-to-end tests) from `tests.fakes.cluster.fixture`;
`python -m tests.fakes.cluster --real` starts one for a demo. Must not be imported by product
code.
"""

from __future__ import annotations

from tests.fakes.cluster.allocation import Allocation
from tests.fakes.cluster.cluster import ALL_CONTROLLERS, ClusterError, SimCluster
from tests.fakes.cluster.layouts import LAYOUTS, Layout
from tests.fakes.cluster.nodes import NodeSpec

__all__ = [
    "ALL_CONTROLLERS",
    "LAYOUTS",
    "Allocation",
    "ClusterError",
    "Layout",
    "NodeSpec",
    "SimCluster",
]
