"""Env vars on the plugin container beat the config file (docs/upstream-facts.md P1.1), per
deployment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster, kubectl_for

pytestmark = pytest.mark.kubectl
MIG = {0: ["3g.40gb", "3g.40gb"], 1: ["1g.10gb"] * 7}
FILE_SAYS_NONE = {"default": "version: v1\nflags:\n  migStrategy: none\n"}
FILE_SAYS_MIXED = {"default": "version: v1\nflags:\n  migStrategy: mixed\n"}
MIXED_RESOURCES = {
    "nvidia.com/gpu": "2",
    "nvidia.com/mig-3g.40gb": "2",
    "nvidia.com/mig-1g.10gb": "7",
}


def nvidia(cluster: SimCluster) -> dict[str, str]:
    allocatable = cluster.store.get("nodes", "gpu-a")["status"]["allocatable"]
    return {k: v for k, v in allocatable.items() if k.startswith("nvidia.com/") and v != "0"}


@pytest.mark.parametrize("layout", ["helm", "static"])
def test_kubectl_set_env_mig_strategy_overrides_the_file(
    sim_cluster: MakeSimCluster, tmp_path: Path, layout: str
) -> None:
    cluster = sim_cluster(
        [NodeSpec("gpu-a", "H100-SXM5-80GB", 4, mig=MIG)],
        layout=layout,
        configs=FILE_SAYS_NONE,
        default_config="default",
    )
    assert nvidia(cluster) == {"nvidia.com/gpu": "4"}
    kubectl = kubectl_for(cluster, tmp_path)
    assert cluster.layout is not None
    done = kubectl(
        "set",
        "env",
        f"daemonset/{cluster.layout.plugin_daemonset}",
        "-n",
        cluster.layout.namespace,
        "-c",
        cluster.layout.plugin_container,
        "MIG_STRATEGY=mixed",
    )
    assert done.returncode == 0, done.stderr
    cluster.settle()  # the template changed, so the DaemonSet rolled the pod
    assert nvidia(cluster) == MIXED_RESOURCES


def test_the_operators_mig_strategy_beats_the_configmap_until_the_policy_changes(
    sim_cluster: MakeSimCluster, tmp_path: Path
) -> None:
    cluster = sim_cluster(
        [NodeSpec("gpu-a", "H100-SXM5-80GB", 4, mig=MIG)],
        layout="gpu-operator",
        configs=FILE_SAYS_MIXED,
        default_config="default",
    )
    # ClusterPolicy mig.strategy=single sets MIG_STRATEGY=single; single cannot name this node.
    assert nvidia(cluster) == {}
    said = cluster.plugin_log("gpu-a", previous=True) + cluster.plugin_log("gpu-a")
    assert "more than one MIG device type present on node" in said  # checked first by v0.19.3
    kubectl = kubectl_for(cluster, tmp_path)
    patch = json.dumps({"spec": {"mig": {"strategy": "mixed"}}})
    done = kubectl("patch", "clusterpolicy", "cluster-policy", "--type", "merge", "-p", patch)
    assert done.returncode == 0, done.stderr
    cluster.settle()
    assert nvidia(cluster) == MIXED_RESOURCES


def test_devicePlugin_env_in_the_cluster_policy_reaches_the_plugin(
    sim_cluster: MakeSimCluster, tmp_path: Path
) -> None:
    cluster = sim_cluster(
        [NodeSpec("gpu-a", "H100-SXM5-80GB", 4, mig=MIG)],
        layout="gpu-operator",
        configs=FILE_SAYS_NONE,
        default_config="default",
    )
    kubectl = kubectl_for(cluster, tmp_path)
    env = [{"name": "MIG_STRATEGY", "value": "none"}]
    kubectl(
        "patch",
        "clusterpolicy",
        "cluster-policy",
        "--type",
        "merge",
        "-p",
        json.dumps({"spec": {"devicePlugin": {"env": env}}}),
    )
    cluster.settle()
    assert nvidia(cluster) == {"nvidia.com/gpu": "4"}
