"""NVIDIA's own device plugin and the Python stand-in (tests/fakes/cluster/deviceplugin.py)
advertise the same resources and device IDs on the same node, config after config.

One A100×4 node with MIG devices on two GPUs; the config-manager switches the plugin through
MIG strategies and time-slicing configs by the node's `nvidia.com/device-plugin.config` label
(a SIGHUP to NVIDIA's running process, an in-process reload for the stand-in). What NVIDIA's
binary registers with the kubelet stand-in, and the Node's allocatable that follows, must equal
what the stand-in registers: so the tests still running on the stand-in claim what NVIDIA's
plugin does, and a difference names the case that shows it.
"""

from __future__ import annotations

import time

import pytest

from tests.fakes.cluster import NodeSpec, SimCluster, netns, sharedplane
from tests.fakes.cluster.fixture import MakeSimCluster
from tests.fakes.node import sandbox

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.timeout(300),
    pytest.mark.skipif(sandbox.unavailable() is not None, reason=str(sandbox.unavailable())),
    pytest.mark.skipif(netns.unavailable() is not None, reason=str(netns.unavailable())),
]

LABEL = "nvidia.com/device-plugin.config"
MIG = {0: ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"], 1: ["7g.80gb"]}


def config(strategy: str, sharing: str = "") -> str:
    return f"version: v1\nflags:\n  migStrategy: {strategy}\n{sharing}"


def sliced(name: str, replicas: int, rename: bool = False) -> str:
    flag = "    renameByDefault: true\n" if rename else ""
    return (
        f"sharing:\n  timeSlicing:\n{flag}    resources:\n"
        f"    - name: {name}\n      replicas: {replicas}\n"
    )


CONFIGS = {
    "none": config("none"),
    "mixed": config("mixed"),
    "mixed-shared": config("mixed", sliced("nvidia.com/mig-1g.10gb", 2)),
    "none-sliced": config("none", sliced("nvidia.com/gpu", 3)),
    "mixed-renamed": config("mixed", sliced("nvidia.com/gpu", 2, rename=True)),
}


def world(cluster: SimCluster) -> tuple[dict[str, list[str]], dict[str, str]]:
    """(resource -> sorted device IDs registered now, the Node's non-zero nvidia allocatable)."""
    ids = {name: sorted(devices) for name, devices in cluster.advertised("gpu-a").items()}
    allocatable = cluster.store.get("nodes", "gpu-a")["status"].get("allocatable") or {}
    shown = {k: v for k, v in allocatable.items() if k.startswith("nvidia.com/") and v != "0"}
    return ids, shown


def switch(cluster: SimCluster, key: str) -> None:
    cluster.store.patch("nodes", "gpu-a", {"metadata": {"labels": {LABEL: key}}})


def test_nvidia_plugin_advertises_what_the_stand_in_does(sim_cluster: MakeSimCluster) -> None:
    node = NodeSpec("gpu-a", "A100-SXM4-80GB", 4, labels={LABEL: "none"}, mig=MIG)
    expected: dict[str, tuple[dict[str, list[str]], dict[str, str]]] = {}
    stand_in = sim_cluster([node], layout="helm", configs=CONFIGS, default_config="none")
    for key in CONFIGS:
        switch(stand_in, key)
        stand_in.settle(20)
        expected[key] = world(stand_in)
    stand_in.stop()
    sharedplane.reset()  # the same node again, on a fresh server

    nvidia = sim_cluster(
        [node], layout="helm", configs=CONFIGS, default_config="none",
        nvidia_plugin=True, node_networks=True,
    )  # fmt: skip
    differences = {}
    for key in CONFIGS:
        switch(nvidia, key)
        deadline = time.monotonic() + 30
        got = world(nvidia)
        while got != expected[key] and time.monotonic() < deadline:
            time.sleep(0.5)
            got = world(nvidia)
        if got != expected[key]:
            differences[key] = {"stand-in": expected[key], "nvidia": got}
    assert not differences, differences
