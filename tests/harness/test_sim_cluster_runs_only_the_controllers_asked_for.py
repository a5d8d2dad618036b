"""SimCluster's node-side controllers can be left out, and a left-out one really does nothing
(on the real control plane, whose own controllers and KWOK place and run the pods)."""

from __future__ import annotations

import pytest

from tests.kit.cluster import ALL_CONTROLLERS, NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

NODES = [NodeSpec("gpu-a", "L4", 2)]


def test_without_the_device_plugin_simulation_plugin_pods_run_but_advertise_nothing(
    sim_cluster: MakeSimCluster,
) -> None:
    wanted = [c for c in ALL_CONTROLLERS if c != "device-plugin"]
    cluster = sim_cluster(NODES, layout="static", controllers=wanted)
    pod = cluster.plugin_pod("gpu-a")
    assert pod is not None and pod["status"]["phase"] == "Running"
    assert "nvidia.com/gpu" not in cluster.store.get("nodes", "gpu-a")["status"]["capacity"]


def test_an_unknown_controller_name_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown controllers"):
        SimCluster(NODES, controllers=["daemonset"])
