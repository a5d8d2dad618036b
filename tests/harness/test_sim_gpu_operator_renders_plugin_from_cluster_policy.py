"""The GPU Operator stand-in: ClusterPolicy changes re-render the plugin DaemonSet
(docs/upstream-facts.md P3.4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import eventually
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster, kubectl_for

pytestmark = pytest.mark.kubectl
Obj = dict[str, Any]
TS = (
    "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
    "    - name: nvidia.com/gpu\n      replicas: {n}\n"
)
NODES = [
    NodeSpec("gpu-a", "H100-SXM5-80GB", 8),
    NodeSpec("gpu-b", "A100-SXM4-80GB", 4),
    NodeSpec("cpu-1"),
]


def env_of(container: Obj) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env") or [] if "value" in e}


def plugin_ds(cluster: SimCluster) -> Obj:
    return cluster.store.get("daemonsets", "nvidia-device-plugin-daemonset", "gpu-operator")


def test_setting_devicePlugin_config_rolls_pods_onto_the_new_configmap_and_default(
    sim_cluster: MakeSimCluster, tmp_path: Path
) -> None:
    cluster = sim_cluster(NODES, layout="gpu-operator")  # installed without any config
    kubectl = kubectl_for(cluster, tmp_path)
    spec = plugin_ds(cluster)["spec"]["template"]["spec"]
    assert [c["name"] for c in spec["containers"]] == ["nvidia-device-plugin"]
    assert "CONFIG_FILE" not in env_of(spec["containers"][0])
    old_pods = {
        p["metadata"]["uid"]
        for p in cluster.store.list(
            "pods", "gpu-operator", label_selector="app=nvidia-device-plugin-daemonset"
        )
    }

    configmap = kubectl(
        "create",
        "configmap",
        "time-slicing-config",
        "-n",
        "gpu-operator",
        f"--from-literal=two={TS.format(n=2)}",
        f"--from-literal=four={TS.format(n=4)}",
    )
    assert configmap.returncode == 0, configmap.stderr
    patch = {
        "spec": {"devicePlugin": {"config": {"name": "time-slicing-config", "default": "four"}}}
    }
    done = kubectl(
        "patch",
        "clusterpolicies.nvidia.com",
        "cluster-policy",
        "--type",
        "merge",
        "-p",
        json.dumps(patch),
    )
    assert done.returncode == 0, done.stderr
    cluster.settle()

    spec = plugin_ds(cluster)["spec"]["template"]["spec"]
    sidecar = next(c for c in spec["containers"] if c["name"] == "config-manager")
    assert env_of(sidecar)["DEFAULT_CONFIG"] == "four"
    assert env_of(sidecar)["FALLBACK_STRATEGIES"] == "empty"
    assert [c["name"] for c in spec["initContainers"]] == [
        "toolkit-validation",
        "config-manager-init",
    ]
    volumes = {v["name"]: v for v in spec["volumes"]}  # the server adds defaultMode: 420
    assert volumes["time-slicing-config"]["configMap"]["name"] == "time-slicing-config"
    pods = cluster.store.list(
        "pods", "gpu-operator", label_selector="app=nvidia-device-plugin-daemonset"
    )
    assert not old_pods & {p["metadata"]["uid"] for p in pods}
    assert (cluster.allocatable("gpu-a"), cluster.allocatable("gpu-b")) == (32, 16)

    patch["spec"]["devicePlugin"]["config"]["default"] = "two"
    kubectl("patch", "clusterpolicy", "cluster-policy", "--type", "merge", "-p", json.dumps(patch))
    cluster.settle()
    assert (cluster.allocatable("gpu-a"), cluster.allocatable("gpu-b")) == (16, 8)


def test_an_unlabelled_node_without_a_default_gets_no_sharing_and_no_error(
    sim_cluster: MakeSimCluster,
) -> None:
    # FALLBACK_STRATEGIES=empty: the operator's config-manager links /dev/null
    # (docs/upstream-facts.md P3.4).
    cluster = sim_cluster(NODES, layout="gpu-operator", configs={"four": TS.format(n=4)})
    assert (cluster.allocatable("gpu-a"), cluster.allocatable("gpu-b")) == (8, 4)
    state = cluster.plugin_state("gpu-a")
    assert state is not None and state.selected == "" and state.init_error is None
    cluster.store.patch(
        "nodes", "gpu-b", {"metadata": {"labels": {"nvidia.com/device-plugin.config": "four"}}}
    )
    cluster.settle()
    assert (cluster.allocatable("gpu-a"), cluster.allocatable("gpu-b")) == (8, 16)


def test_gpu_nodes_get_the_operators_deploy_labels_and_pods_follow_them(
    sim_cluster: MakeSimCluster, tmp_path: Path
) -> None:
    cluster = sim_cluster(NODES, layout="gpu-operator")

    def deployed() -> dict[str, str] | None:  # the operator follows GFD's labels (via NFD)
        labels = cluster.store.get("nodes", "gpu-a")["metadata"]["labels"]
        return labels if "nvidia.com/gpu.deploy.mig-manager" in labels else None

    labels = eventually(deployed, timeout=60)
    assert labels, "the operator never labelled gpu-a for its MIG manager"
    assert labels["nvidia.com/gpu.deploy.device-plugin"] == "true"
    assert labels["nvidia.com/gpu.deploy.mig-manager"] == "true"  # GFD says mig.capable
    assert (
        "nvidia.com/gpu.deploy.device-plugin"
        not in cluster.store.get("nodes", "cpu-1")["metadata"]["labels"]
    )
    kubectl = kubectl_for(cluster, tmp_path)
    # What mig-manager does before repartitioning: the plugin pod leaves, the GPUs go to 0.
    kubectl(
        "label",
        "node",
        "gpu-b",
        "nvidia.com/gpu.deploy.device-plugin=paused-for-mig-change",
        "--overwrite",
    )
    cluster.settle()
    assert cluster.plugin_pod("gpu-b") is None
    assert cluster.allocatable("gpu-b") == 0 and cluster.allocatable("gpu-a") == 8
    kubectl("label", "node", "gpu-b", "nvidia.com/gpu.deploy.device-plugin=true", "--overwrite")
    cluster.settle()
    assert cluster.allocatable("gpu-b") == 4
