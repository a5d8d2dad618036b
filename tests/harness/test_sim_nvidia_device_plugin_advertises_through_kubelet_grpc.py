"""NVIDIA's own device plugin (v0.19.3, unmodified) on simulated GPU nodes, registered with a
kubelet stand-in that speaks the kubelet's gRPC, publishes what the Node advertises.

`SimCluster` (its default): each GPU node's plugin pod runs NVIDIA's binary in the node's
sandbox (its own /var/lib/kubelet/device-plugins, its network namespace) over the node's
libnvidia-ml.so.1; it registers on the node's `kubelet.sock`, and its ListAndWatch lists become
the Node's `status.capacity`/`allocatable` through the real API server. What a user sees:
`kubectl get node` capacity, `kubectl logs` of the plugin pod, the process coming and going with
its pod.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.kit.cluster import NodeSpec
from tests.kit.cluster.cluster import SimCluster
from tests.kit.cluster.fixture import MakeSimCluster, kubectl_for
from tests.kit.node import sandbox
from tests.kit.plane import netns

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


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def wait_for_quietly(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


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
        node_networks=True,
        **kwargs,
    )


def test_nvidia_plugin_advertises_two_h100s_on_the_node(sim_cluster: MakeSimCluster) -> None:
    cluster = h100_cluster(sim_cluster)
    wait_for("nvidia.com/gpu: 2", lambda: advertised(cluster, "gpu-1", "nvidia.com/gpu", "2"))
    manager = cluster.nvidia_plugin.managers["gpu-1"]
    version, endpoint, resource = manager.registrations[-1]
    assert (version, resource) == ("v1beta1", "nvidia.com/gpu")
    assert endpoint == "nvidia-gpu.sock"
    ids = sorted(manager.healthy()["nvidia.com/gpu"])
    assert ids == sorted(g.uuid for g in cluster.node_gpus("gpu-1"))


@pytest.mark.parametrize(
    ("config", "resource"),
    [(TIME_SLICED, "nvidia.com/gpu"), (RENAMED, "nvidia.com/gpu.shared")],
    ids=["time-sliced", "renamed"],
)
def test_nvidia_plugin_advertises_replicas_of_a_time_slicing_config(
    sim_cluster: MakeSimCluster, config: str, resource: str
) -> None:
    cluster = h100_cluster(sim_cluster, configs={"ts": config}, default_config="ts")
    wait_for(f"{resource}: 8", lambda: advertised(cluster, "gpu-1", resource, "8"))
    ids = cluster.nvidia_plugin.managers["gpu-1"].healthy()[resource]
    uuids = {g.uuid for g in cluster.node_gpus("gpu-1")}
    # NVIDIA's replica IDs: the GPU's UUID and the replica's number
    assert sorted(ids) == sorted(f"{u}::{r}" for u in uuids for r in range(4))
    if resource != "nvidia.com/gpu":
        assert "nvidia.com/gpu" not in node_status(cluster, "gpu-1")[0]


def plugin_pod(cluster: SimCluster) -> dict[str, object]:
    pod = cluster.plugin_pod("gpu-1")
    assert pod is not None
    return pod


def test_plugin_pod_logs_show_nvidias_start_up_lines(
    sim_cluster: MakeSimCluster, tmp_path: Path
) -> None:
    cluster = h100_cluster(sim_cluster)
    wait_for("nvidia.com/gpu: 2", lambda: advertised(cluster, "gpu-1", "nvidia.com/gpu", "2"))
    kubectl = kubectl_for(cluster, tmp_path)
    pod = plugin_pod(cluster)
    meta = pod["metadata"]
    assert isinstance(meta, dict)

    def logs() -> str:
        got = kubectl(
            "logs",
            "-n",
            str(meta["namespace"]),
            str(meta["name"]),
            "-c",
            "nvidia-device-plugin-ctr",
        )
        assert got.returncode == 0, got.stderr
        return got.stdout if "Registered device plugin" in got.stdout else ""

    text = wait_for("the plugin's registration in its log", logs)
    assert '"Starting NVIDIA Device Plugin" version="v0.19.3"' in text
    # its own socket in the hard-coded directory, which the sandbox made the node's own
    assert "on /var/lib/kubelet/device-plugins/nvidia-gpu.sock" in text
    assert "Registered device plugin for 'nvidia.com/gpu' with Kubelet" in text


def test_deleting_the_plugin_pod_stops_nvidias_process_and_a_new_pod_brings_it_back(
    sim_cluster: MakeSimCluster,
) -> None:
    cluster = h100_cluster(sim_cluster)
    wait_for("nvidia.com/gpu: 2", lambda: advertised(cluster, "gpu-1", "nvidia.com/gpu", "2"))
    runtime = cluster.nvidia_plugin
    first = wait_for("NVIDIA's process", lambda: runtime.program_pid("gpu-1"))
    # the process has the node's own libnvidia-ml.so.1 mapped, from the node's driver root
    driver = cluster.sides["gpu-1"].driver
    maps = Path(f"/proc/{first}/maps").read_text(encoding="ascii")
    assert str(driver.lib_dir / "libnvidia-ml.so.") in maps
    assert Path(f"/proc/{first}/exe").resolve().name == "nvidia-device-plugin"

    pod = plugin_pod(cluster)
    meta = pod["metadata"]
    assert isinstance(meta, dict)
    manager = runtime.managers["gpu-1"]
    written = len(manager.published)
    cluster.store.delete("pods", str(meta["name"]), str(meta["namespace"]))
    wait_for("the first process gone", lambda: not Path(f"/proc/{first}").exists())
    # the kubelet kept the resource's capacity and made none of it allocatable (the DaemonSet's
    # next pod may have registered again since: the Node's own status can have moved on)
    stopped = ({"nvidia.com/gpu": "2"}, {"nvidia.com/gpu": "0"})
    wait_for("capacity 2 and allocatable 0 written", lambda: stopped in manager.published[written:])
    # the DaemonSet's new pod starts NVIDIA's process again
    wait_for("nvidia.com/gpu: 2 again", lambda: advertised(cluster, "gpu-1", "nvidia.com/gpu", "2"))
    second = wait_for("a new process", lambda: runtime.program_pid("gpu-1"))
    assert second != first
    assert plugin_pod(cluster)["metadata"]["uid"] != meta["uid"]  # type: ignore[index]


REAL_START = (
    ROOT / "tests" / "data" / "nvidia" / "h200-driver-580.159.04-device-plugin-v0.19.3-start.log"
)
_KLOG_PREFIX = re.compile(r"^([IWEF])\d{4} [\d:.]+\s+\d+ ", re.MULTILINE)
# where the driver is differs by design: the real node's is /, a simulated node's its own root
_ROOTS = re.compile(r'"(nvidiaDriverRoot|nvidiaDevRoot|containerDriverRoot)": "[^"]*"')


def start_up(log: str) -> list[str]:
    """The start-up lines up to serving `nvidia.com/gpu`, without time, thread and roots."""
    text = _ROOTS.sub(r'"\1": "<root>"', _KLOG_PREFIX.sub(r"\1 ", log))
    lines = text.splitlines()
    end = next(i for i, line in enumerate(lines) if "Starting to serve 'nvidia.com/gpu'" in line)
    return lines[: end + 1]


def test_nvidia_plugin_starts_on_a_simulated_h200_as_it_did_on_a_real_one(
    sim_cluster: MakeSimCluster,
) -> None:
    """The static manifest (NVIDIA's defaults, as the reading was taken): the same lines, the
    same config, NVML detected as the platform, the same socket; only then does the simulated
    node differ, by having a kubelet to register with."""
    cluster = sim_cluster([NodeSpec("h200-node", "H200-SXM-141GB", 1)], "static")
    wait_for("nvidia.com/gpu: 1", lambda: advertised(cluster, "h200-node", "nvidia.com/gpu", "1"))
    pod = cluster.plugin_pod("h200-node")
    assert pod is not None
    meta = pod["metadata"]

    def log() -> str:
        text = cluster.logs.get(meta["namespace"], meta["name"], "nvidia-device-plugin-ctr") or ""
        return text if "Registered device plugin" in text else ""

    text = wait_for("the plugin's registration in its log", log)
    assert start_up(text) == start_up(REAL_START.read_text(encoding="utf-8"))


def test_an_xid_on_one_gpu_makes_nvidias_plugin_report_it_unhealthy(
    sim_cluster: MakeSimCluster,
) -> None:
    """Xid 79 (GPU fallen off the bus) raised on GPU 1 through the node's library: NVIDIA's
    health checker marks it Unhealthy in ListAndWatch; the kubelet keeps capacity 2 and makes
    one GPU allocatable."""
    cluster = h100_cluster(sim_cluster)
    wait_for("nvidia.com/gpu: 2", lambda: advertised(cluster, "gpu-1", "nvidia.com/gpu", "2"))

    def one_left() -> bool:
        capacity, allocatable = node_status(cluster, "gpu-1")
        return capacity.get("nvidia.com/gpu") == "2" and allocatable.get("nvidia.com/gpu") == "1"

    # The health checker sees only events raised after it registered for them, a moment after
    # the plugin registered: raise again until one arrives.
    deadline = time.monotonic() + 30
    while not one_left():
        assert time.monotonic() < deadline, "capacity 2, allocatable 1 never came"
        cluster.nodes["gpu-1"].raise_xid(1, 79)
        wait_for_quietly(one_left, 1.0)
    healthy = cluster.nvidia_plugin.managers["gpu-1"].healthy()["nvidia.com/gpu"]
    assert healthy == [cluster.node_gpus("gpu-1")[0].uuid]
