"""`share rollback` after a hand edit of what the change wrote outside the ConfigMap: a node's
`nvidia.com/device-plugin.config` label (Helm chart) or the ClusterPolicy's
`spec.devicePlugin.config` (GPU Operator). It used to restore over the edit without a word; now
it refuses, showing the edit, and `--force` discards it. Through the real kubectl."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from kubectl_gpu import keys
from tests.journey.fixtures import Kubectl
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(180)]
PLAIN = "version: v1\nflags:\n  migStrategy: none\n"
LABEL = keys.DEVICE_PLUGIN_CONFIG_LABEL


def label_of(cluster: SimCluster, node: str) -> str | None:
    labels = cluster.client.get("nodes", node)["metadata"].get("labels") or {}
    return labels.get(LABEL)


def test_a_relabelled_node_is_kept_unless_forced(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl]
) -> None:
    configs = {"any": PLAIN, "mine": PLAIN}
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 2)], "helm", configs, "any")
    k = kubectl(cluster)
    shared = k("gpu", "share", "--replicas", "2", "--node", "gpu-a", "--wait", "--timeout", "30s")
    assert shared.returncode == 0, shared.stderr
    assert label_of(cluster, "gpu-a") == "kubectl-gpu-ts-2"
    assert k("label", "node", "gpu-a", f"{LABEL}=mine", "--overwrite").returncode == 0

    refused = k("gpu", "share", "rollback")
    dry = k("gpu", "share", "rollback", "--dry-run")

    assert refused.returncode == dry.returncode == 1, refused.stderr
    assert f"the {LABEL} label of node(s) gpu-a were edited after the change" in refused.stderr
    assert f"node gpu-a: {LABEL}=kubectl-gpu-ts-2 written by the change, now mine" in (
        refused.stderr
    )
    assert label_of(cluster, "gpu-a") == "mine"  # the edit is kept

    forced = k("gpu", "share", "rollback", "--force")
    assert forced.returncode == 0, forced.stderr
    assert label_of(cluster, "gpu-a") is None


def test_an_edited_cluster_policy_config_is_kept_unless_forced(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl]
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1, gpu_taint=True)], "gpu-operator")
    k = kubectl(cluster)
    shared = k("gpu", "share", "--replicas", "2", "--wait", "--timeout", "60s")
    assert shared.returncode == 0, shared.stderr
    [policy] = k("get", "clusterpolicies.nvidia.com", "-o", "name").stdout.split()
    config = json.loads(k("get", policy, "-o", "json").stdout)["spec"]["devicePlugin"]["config"]
    edit = {"spec": {"devicePlugin": {"config": {**config, "default": "hand-made"}}}}
    assert k("patch", policy, "--type", "merge", "-p", json.dumps(edit)).returncode == 0

    refused = k("gpu", "share", "rollback")

    assert refused.returncode == 1, refused.stderr
    assert "'s spec.devicePlugin.config were edited after the change" in refused.stderr
    assert "default: hand-made}" in refused.stderr
    after = json.loads(k("get", policy, "-o", "json").stdout)["spec"]["devicePlugin"]["config"]
    assert after["default"] == "hand-made"  # kept
