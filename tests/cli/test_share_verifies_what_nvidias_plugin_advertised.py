"""`kubectl gpu share --replicas 4 --wait` verifies the capacity NVIDIA's own device plugin
advertised (v0.19.3, unmodified, the simulated cluster's device plugin).

On a Helm install with one H100×2 node, share writes the time-slicing key, labels the node and
restarts the plugin pod; the pod's new NVIDIA process reads the key the config-manager linked,
registers 8 replicas with the node's kubelet stand-in over the kubelet's gRPC, and share's
verification reads that from the Node as the real API server serves it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.node import sandbox
from tests.kit.plane import netns

Run = Callable[..., CliResult]
PLAIN = "version: v1\nflags:\n  migStrategy: none\n"
pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.timeout(180),
    pytest.mark.skipif(sandbox.unavailable() is not None, reason=str(sandbox.unavailable())),
    pytest.mark.skipif(netns.unavailable() is not None, reason=str(netns.unavailable())),
]


def test_share_replicas_4_verifies_eight_from_nvidias_plugin(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster(
        [NodeSpec("gpu-a", "H100-SXM5-80GB", 2), NodeSpec("cpu-1")],
        "helm",
        {"any": PLAIN},
        "any",
        node_networks=True,
    )
    runtime = cluster.nvidia_plugin
    deadline = time.monotonic() + 60
    while cluster.allocatable("gpu-a") != 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    before = runtime.program_pid("gpu-a")
    assert cluster.allocatable("gpu-a") == 2 and before is not None

    result = run_cli(
        "--kubeconfig", str(cluster.kubeconfig), "share", "--replicas", "4", "--wait",
        "--timeout", "60s", "-o", "json",
    )  # fmt: skip
    assert result.exception is None, result.exception
    assert result.exit_code == 0, result.stderr
    [row] = result.json["nodes"]
    assert (row["node"], row["before"], row["after"], row["result"]) == ("gpu-a", 2, 8, "verified")
    # what share verified is what NVIDIA's new process registered: its replica IDs
    ids = runtime.managers["gpu-a"].healthy()["nvidia.com/gpu"]
    uuids = {g.uuid for g in cluster.node_gpus("gpu-a")}
    assert sorted(ids) == sorted(f"{u}::{r}" for u in uuids for r in range(4))
    after = runtime.program_pid("gpu-a")
    assert after is not None and after != before  # the pod restart restarted NVIDIA's process
