"""When NVIDIA's device plugin reads its config, per deployment (docs/upstream-facts.md P3.3,
P3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import eventually
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster, kubectl_for
from tests.kit.kube.kubectl import KubectlRunner

pytestmark = pytest.mark.kubectl
Obj = dict[str, Any]


def time_slicing(replicas: int, *, rename: bool = False) -> str:
    rename_line = "    renameByDefault: true\n" if rename else ""
    return (
        "version: v1\nsharing:\n  timeSlicing:\n"
        f"{rename_line}    resources:\n    - name: nvidia.com/gpu\n      replicas: {replicas}\n"
    )


CONFIGS = {
    "default": "version: v1\n",
    "ts4": time_slicing(4),
    "bad": time_slicing(1),  # "number of replicas must be >= 2": the plugin exits 1
    "renamed": time_slicing(4, rename=True),
}
NODES = [
    NodeSpec("gpu-a", "H100-SXM5-80GB", 8),
    NodeSpec("gpu-b", "A100-SXM4-80GB", 4),
    NodeSpec("cpu-1"),
]


@pytest.fixture(params=["gpu-operator", "helm"])
def configured(request: pytest.FixtureRequest, sim_cluster: MakeSimCluster) -> SimCluster:
    return sim_cluster(NODES, layout=request.param, configs=CONFIGS, default_config="default")


def gpus(cluster: SimCluster, resource: str = "nvidia.com/gpu") -> tuple[int, int]:
    return cluster.allocatable("gpu-a", resource), cluster.allocatable("gpu-b", resource)


def restart_plugins(cluster: SimCluster, kubectl: KubectlRunner) -> None:
    assert cluster.layout is not None
    done = kubectl(
        "rollout",
        "restart",
        f"daemonset/{cluster.layout.plugin_daemonset}",
        "-n",
        cluster.layout.namespace,
    )
    assert done.returncode == 0, done.stderr
    cluster.settle()


def label(kubectl: KubectlRunner, node: str, key: str) -> None:
    done = kubectl("label", "node", node, f"nvidia.com/device-plugin.config={key}", "--overwrite")
    assert done.returncode == 0, done.stderr


def container(pod: Obj, name: str, *, init: bool = False) -> Obj:
    statuses = pod["status"]["initContainerStatuses" if init else "containerStatuses"]
    return next(s for s in statuses if s["name"] == name)


@pytest.mark.parametrize("layout", ["gpu-operator", "helm", "static"])
def test_the_default_config_advertises_each_gpu_once(
    sim_cluster: MakeSimCluster, tmp_path: Path, layout: str
) -> None:
    cluster = sim_cluster(NODES, layout=layout, configs=CONFIGS, default_config="default")
    nodes = json.loads(kubectl_for(cluster, tmp_path)("get", "nodes", "-o", "json").stdout)["items"]
    capacity = {n["metadata"]["name"]: n["status"]["capacity"].get("nvidia.com/gpu") for n in nodes}
    assert capacity == {"gpu-a": "8", "gpu-b": "4", "cpu-1": None}
    assert gpus(cluster) == (8, 4)


def test_an_edited_configmap_takes_effect_only_when_the_plugin_restarts(
    configured: SimCluster, tmp_path: Path
) -> None:
    kubectl = kubectl_for(configured, tmp_path)
    assert configured.layout is not None and configured.layout.config_map
    patch = json.dumps({"data": {"default": time_slicing(4)}})
    edited = kubectl(
        "patch",
        "configmap",
        configured.layout.config_map,
        "-n",
        configured.layout.namespace,
        "--type",
        "merge",
        "-p",
        patch,
    )
    assert edited.returncode == 0, edited.stderr
    configured.settle()
    assert gpus(configured) == (8, 4)  # no file watch, no reload (docs/upstream-facts.md P3.3)
    restart_plugins(configured, kubectl)
    assert gpus(configured) == (32, 16)


def test_a_label_naming_another_key_reloads_without_a_pod_restart(
    configured: SimCluster, tmp_path: Path
) -> None:
    kubectl = kubectl_for(configured, tmp_path)
    before = configured.plugin_pod("gpu-a")
    label(kubectl, "gpu-a", "ts4")
    configured.settle()
    assert gpus(configured) == (32, 4)
    after = configured.plugin_pod("gpu-a")
    assert before is not None and after is not None
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert all(s["restartCount"] == 0 for s in after["status"]["containerStatuses"])
    state = configured.plugin_state("gpu-a")
    assert state is not None and state.selected == "ts4"
    said = configured.plugin_log("gpu-a")  # NVIDIA's process, restarted in place by SIGHUP
    assert said.count("Received SIGHUP, restarting.") == 1
    assert '"replicas": 4' in said.rpartition("Running with config:")[2]


def test_a_label_naming_a_missing_key_crashes_the_sidecar_then_blocks_a_new_pod(
    configured: SimCluster, tmp_path: Path
) -> None:
    kubectl = kubectl_for(configured, tmp_path)
    label(kubectl, "gpu-a", "no-such-key")
    configured.settle()
    pod = configured.plugin_pod("gpu-a")
    assert pod is not None and configured.layout is not None
    sidecar = next(
        s
        for s in pod["status"]["containerStatuses"]
        if s["name"] != configured.layout.plugin_container
    )
    assert sidecar["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert container(pod, configured.layout.plugin_container)["state"].get("running")
    assert gpus(configured) == (8, 4)  # the plugin keeps its old config

    kubectl("delete", "pod", "-n", configured.layout.namespace, pod["metadata"]["name"])
    configured.settle()
    fresh = configured.plugin_pod("gpu-a")
    # A kubelet keeps the pod Pending (Init:CrashLoopBackOff); KWOK, which runs pods on the
    # real control plane, shows it Running: the simulated init container is what fails.
    assert fresh is not None and fresh["metadata"]["uid"] != pod["metadata"]["uid"]
    state = configured.plugin_state("gpu-a")
    assert state is not None and state.init_error == "specified config no-such-key does not exist"
    assert configured.allocatable("gpu-a") == 0 and configured.capacity("gpu-a") == 8


def test_an_invalid_config_crash_loops_the_plugin_and_zeroes_allocatable(
    configured: SimCluster, tmp_path: Path
) -> None:
    kubectl = kubectl_for(configured, tmp_path)
    label(kubectl, "gpu-b", "bad")
    configured.settle()
    assert gpus(configured) == (8, 0)
    assert configured.capacity("gpu-b") == 4  # kubelet keeps the capacity of a gone plugin
    assert configured.layout is not None
    name = configured.layout.plugin_container

    def restarts() -> int:
        pod = configured.plugin_pod("gpu-b")
        return int(container(pod, name)["restartCount"]) if pod else 0

    assert configured.store.wait_until(lambda: restarts() >= 3, timeout=5)
    pod = configured.plugin_pod("gpu-b")
    assert pod is not None
    ctr = container(pod, name)
    assert ctr["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert ctr["lastState"]["terminated"]["exitCode"] == 1
    said = configured.plugin_log("gpu-b", previous=True) + configured.plugin_log("gpu-b")
    assert "number of replicas must be >= 2" in said


def test_rename_by_default_advertises_gpu_shared(configured: SimCluster, tmp_path: Path) -> None:
    kubectl = kubectl_for(configured, tmp_path)
    label(kubectl, "gpu-a", "renamed")
    configured.settle()
    assert configured.allocatable("gpu-a", "nvidia.com/gpu.shared") == 32
    assert configured.allocatable("gpu-a", "nvidia.com/gpu") == 0
    assert configured.capacity("gpu-a", "nvidia.com/gpu") == 8  # the old name lingers at 0

    def relabelled() -> dict[str, str] | None:  # NVIDIA's GFD relabels a moment after the switch
        labels = configured.store.get("nodes", "gpu-a")["metadata"]["labels"]
        return labels if labels.get("nvidia.com/gpu.replicas") == "4" else None

    labels = eventually(relabelled, timeout=60)
    assert labels, "GFD never labelled gpu-a with replicas 4"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"  # renamed: no -SHARED


def test_a_crashed_sidecar_recovers_when_the_label_is_fixed(
    configured: SimCluster, tmp_path: Path
) -> None:
    kubectl = kubectl_for(configured, tmp_path)
    label(kubectl, "gpu-b", "no-such-key")
    configured.settle()
    label(kubectl, "gpu-b", "ts4")

    def reloaded() -> bool:
        state = configured.plugin_state("gpu-b")
        return state is not None and state.selected == "ts4" and state.sidecar_error is None

    # The sidecar reads the label again when kubelet restarts it after its back-off.
    assert configured.store.wait_until(reloaded, timeout=5)
    configured.settle()
    assert gpus(configured) == (8, 16)
