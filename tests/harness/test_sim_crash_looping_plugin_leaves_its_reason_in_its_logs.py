"""A simulated device plugin that rejects its config crash-loops, and `kubectl logs` (current
and `--previous`) shows upstream's own reason as its last line: on the real control plane the
API server proxies the request to KWOK's kubelet endpoint, which serves what the simulated
container wrote (tests/controlplane/containerlogs.py)."""

from __future__ import annotations

import time
from pathlib import Path

from tests.fakes.cluster import NodeSpec, SimCluster
from tests.fakes.cluster.fixture import MakeSimCluster, kubectl_for


def restarts(cluster: SimCluster) -> int:
    pod = cluster.plugin_pod("gpu-a") or {}
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    mine = [s for s in statuses if s["name"] == "nvidia-device-plugin-ctr"]
    return int(mine[0].get("restartCount") or 0) if mine else 0


def test_a_crash_looping_program_leaves_its_reason_in_its_logs(
    sim_cluster: MakeSimCluster, tmp_path: Path
) -> None:
    bad = "version: v1\nflags:\n  plugin:\n    deviceIDStrategy: serial\n"
    cluster = sim_cluster(
        [NodeSpec("gpu-a", "L4", 1)], "helm", {"any": bad}, "any",
        controllers=("kubelet", "device-plugin"),
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while restarts(cluster) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert restarts(cluster) >= 2
    plugin = cluster.plugin_pod("gpu-a")
    assert plugin is not None and cluster.layout is not None
    namespace, name = plugin["metadata"]["namespace"], plugin["metadata"]["name"]
    kubectl = kubectl_for(cluster, tmp_path)
    container = cluster.layout.plugin_container
    current = kubectl("logs", "-n", namespace, name, "-c", container, "--tail", "5")
    previous = kubectl("logs", "-n", namespace, name, "-c", container, "--previous")

    assert current.returncode == 0 and previous.returncode == 0, current.stderr + previous.stderr
    # upstream's own words, from the simulated plugin (tests/fakes/cluster/pluginfields.py)
    reason = "invalid --device-id-strategy option: serial"
    assert reason in current.stdout.splitlines()[-1] and reason in previous.stdout
