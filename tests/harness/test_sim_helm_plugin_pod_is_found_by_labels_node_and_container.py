"""The Helm chart's trap: plugin and GFD pods share their labels (docs/upstream-facts.md P6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.kit.cluster import NodeSpec
from tests.kit.cluster.fixture import MakeSimCluster, kubectl_for

pytestmark = pytest.mark.kubectl
SELECTOR = "app.kubernetes.io/name=nvidia-device-plugin,app.kubernetes.io/instance=nvdp"


def test_the_plugin_pod_of_a_node_needs_labels_node_name_and_container(
    sim_cluster: MakeSimCluster, tmp_path: Path
) -> None:
    cluster = sim_cluster(
        [NodeSpec("gpu-a", "H100-SXM5-80GB", 8), NodeSpec("gpu-b", "L4", 2)],
        layout="helm",
        configs={"default": "version: v1\n"},
    )
    kubectl = kubectl_for(cluster, tmp_path)
    listed = kubectl(
        "get",
        "pods",
        "-n",
        "nvidia-device-plugin",
        "-l",
        SELECTOR,
        "--field-selector",
        "spec.nodeName=gpu-a",
        "-o",
        "json",
    )
    assert listed.returncode == 0, listed.stderr
    pods = json.loads(listed.stdout)["items"]
    assert len(pods) == 2  # the plugin and GFD: same labels, same node
    owners = sorted(p["metadata"]["ownerReferences"][0]["name"] for p in pods)
    assert owners == [
        "nvdp-nvidia-device-plugin",
        "nvdp-nvidia-device-plugin-gpu-feature-discovery",
    ]
    plugin = [
        p
        for p in pods
        if any(c["name"] == "nvidia-device-plugin-ctr" for c in p["spec"]["containers"])
    ]
    assert len(plugin) == 1 and plugin[0]["status"]["phase"] == "Running"
    assert plugin[0]["metadata"]["name"] == (cluster.plugin_pod("gpu-a") or {}).get(
        "metadata", {}
    ).get("name")
    gfd = [p for p in pods if p is not plugin[0]][0]
    assert [c["name"] for c in gfd["spec"]["containers"]] == [
        "gpu-feature-discovery-sidecar",
        "gpu-feature-discovery-ctr",
    ]
    assert [c["name"] for c in plugin[0]["spec"]["containers"]] == [
        "nvidia-device-plugin-sidecar",
        "nvidia-device-plugin-ctr",
    ]
    volumes = {v["name"]: v for v in plugin[0]["spec"]["volumes"]}
    assert volumes["available-configs"]["configMap"]["name"] == "nvdp-nvidia-device-plugin-configs"
    assert "checksum/config" in plugin[0]["metadata"]["annotations"]


def test_without_a_default_two_keys_and_no_named_key_block_the_plugin(
    sim_cluster: MakeSimCluster,
) -> None:
    # fallbackStrategies named,single: neither finds a config, so config-manager-init fails.
    cluster = sim_cluster(
        [NodeSpec("gpu-a", "L4", 1)],
        layout="helm",
        configs={"a": "version: v1\n", "b": "version: v1\n"},
    )
    state = cluster.plugin_state("gpu-a")
    assert state is not None
    assert (
        state.init_error == "no config was set, no default was provided, and all fallbacks failed"
    )
    assert cluster.allocatable("gpu-a") == 0
    # the pod would stay Pending on a kubelet; KWOK, on the real control plane, shows it Running
    assert cluster.plugin_pod("gpu-a") is not None
