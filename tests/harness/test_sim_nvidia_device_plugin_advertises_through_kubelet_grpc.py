"""NVIDIA's own device plugin (v0.19.3, unmodified) on simulated GPU nodes, registered with a
kubelet stand-in that speaks the kubelet's gRPC, publishes what the Node advertises.

`SimCluster(nvidia_plugin=True)`: each GPU node's plugin pod runs NVIDIA's binary in the node's
sandbox (its own /var/lib/kubelet/device-plugins, its network namespace) over the node's
libnvidia-ml.so.1; it registers on the node's `kubelet.sock`, and its ListAndWatch lists become
the Node's `status.capacity`/`allocatable` through the real API server. What a user sees:
`kubectl get node` capacity, `kubectl logs` of the plugin pod, the process coming and going with
its pod.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.fakes.cluster import NodeSpec, netns
from tests.fakes.cluster.cluster import SimCluster
from tests.fakes.cluster.fixture import MakeSimCluster, kubectl_for
from tests.fakes.cluster.fixture import real_cluster as sim_cluster  # noqa: F401 (fixture)
from tests.fakes.node import sandbox

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.timeout(300),
    pytest.mark.skipif(sandbox.unavailable() is not None, reason=str(sandbox.unavailable())),
    pytest.mark.skipif(netns.unavailable() is not None, reason=str(netns.unavailable())),
]

TIME_SLICED = """version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 4
"""
RENAMED = """version: v1
sharing:
  timeSlicing:
    renameByDefault: true
    resources:
    - name: nvidia.com/gpu
      replicas: 4
"""


def wait_for(what: str, check, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def node_status(cluster: SimCluster, node: str) -> tuple[dict[str, str], dict[str, str]]:
    status = cluster.store.get("nodes", node).get("status") or {}
    return dict(status.get("capacity") or {}), dict(status.get("allocatable") or {})


def advertised(cluster: SimCluster, node: str, resource: str, count: str) -> bool:
    capacity, allocatable = node_status(cluster, node)
    return capacity.get(resource) == count and allocatable.get(resource) == count


def h100_cluster(make: MakeSimCluster, **kwargs: object) -> SimCluster:
    return make(
        [NodeSpec("gpu-1", "H100-SXM5-80GB", 2)],
        "helm",
        nvidia_plugin=True,
        node_networks=True,
        **kwargs,
    )


def test_nvidia_plugin_advertises_two_h100s_on_the_node(sim_cluster: MakeSimCluster) -> None:
    cluster = h100_cluster(sim_cluster)
    wait_for("nvidia.com/gpu: 2", lambda: advertised(cluster, "gpu-1", "nvidia.com/gpu", "2"))
    manager = cluster.nvidia_plugin.managers["gpu-1"]  # type: ignore[union-attr]
    version, endpoint, resource = manager.registrations[-1]
    assert (version, resource) == ("v1beta1", "nvidia.com/gpu")
    assert endpoint == "nvidia-gpu.sock"
    ids = sorted(manager.healthy()["nvidia.com/gpu"])
    assert ids == sorted(g.uuid for g in cluster.node_gpus("gpu-1"))
