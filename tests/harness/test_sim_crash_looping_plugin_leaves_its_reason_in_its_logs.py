"""NVIDIA's device plugin rejecting its config crash-loops, and `kubectl logs` (current and
`--previous`) shows its own reason as its last line: on the real control plane the
API server proxies the request to KWOK's kubelet endpoint, which serves what the simulated
container wrote (tests/kit/plane/containerlogs.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster, kubectl_for


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
    # NVIDIA's own words (cmd/nvidia-device-plugin validateFlags), from its process
    reason = "invalid --device-id-strategy option: serial"

    def logs() -> tuple[Any, Any]:
        current = kubectl("logs", "-n", namespace, name, "-c", container, "--tail", "5")
        previous = kubectl("logs", "-n", namespace, name, "-c", container, "--previous")
        return current, previous

    def shown(current: Any, previous: Any) -> bool:
        lines = current.stdout.splitlines()
        return bool(lines) and reason in lines[-1] and reason in previous.stdout

    # a restarted process writes its log as it runs, and each restart rotates the files
    deadline = time.monotonic() + 30
    current, previous = logs()
    while not shown(current, previous) and time.monotonic() < deadline:
        time.sleep(0.2)
        current, previous = logs()

    assert current.returncode == 0 and previous.returncode == 0, current.stderr + previous.stderr
    assert reason in current.stdout.splitlines()[-1] and reason in previous.stdout
