"""`share` and `share off` after a hand edit of what an earlier share wrote outside the
ConfigMap: a node's `nvidia.com/device-plugin.config` label (Helm chart) or the GPU Operator
ClusterPolicy's `spec.devicePlugin.config`. They used to write over the edit without a word
(only `share rollback` kept it); now each refuses before its first write, naming the object,
the field, what kubectl gpu last wrote and what is there now; the dry runs give the same
verdict and exit code; `--force` overwrites and says what it overwrote. On the real control
plane, through the CLI."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

Run = Callable[..., CliResult]
pytestmark = pytest.mark.timeout(180)  # clusters on the real control plane
LABEL = "nvidia.com/device-plugin.config"
PLAIN = "version: v1\nflags:\n  migStrategy: none\n"
SHARED_3 = PLAIN + (
    "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 3\n"
)
DRY_RUNS = ("--dry-run=client", "--dry-run=server")
OPERATOR_NS = "gpu-operator"


def cli(run_cli: Run, cluster: SimCluster, *args: str) -> CliResult:
    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "share", *args)
    assert result.exception is None, result.exception
    return result


def world(cluster: SimCluster, namespace: str) -> dict[str, Any]:
    """What a share writes: the ConfigMaps (data and record), node config labels, the
    ClusterPolicy's spec (GPU Operator)."""
    cluster.settle()
    found: dict[str, Any] = {
        "configmaps": {
            c["metadata"]["name"]: (c.get("data"), c["metadata"].get("annotations"))
            for c in cluster.client.list("configmaps", namespace)
        },
        "labels": {
            n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(LABEL)
            for n in cluster.client.list("nodes")
        },
    }
    policies = cluster.client.list("clusterpolicies.nvidia.com") if namespace == OPERATOR_NS else []
    found["policies"] = {p["metadata"]["name"]: p["spec"] for p in policies}
    return found


def refused_alike(run_cli: Run, cluster: SimCluster, args: tuple[str, ...], ns: str) -> str:
    """The real run and both dry runs refuse with exit 1 and write nothing; the real run's
    stderr."""
    before = world(cluster, ns)
    real = cli(run_cli, cluster, *args)
    assert real.exit_code == 1, real.stderr
    for dry_run in DRY_RUNS:
        dry = cli(run_cli, cluster, *args, dry_run)
        assert dry.exit_code == 1, (dry_run, dry.stderr)
        assert "changed since kubectl gpu last wrote them" in dry.stderr, dry.stderr
    assert world(cluster, ns) == before  # nothing was written
    return real.stderr


# ---- a node's config label (the Helm chart) ------------------------------------------------


@pytest.fixture
def relabelled(run_cli: Run, sim_cluster: MakeSimCluster) -> SimCluster:
    """`share --node gpu-a` wrote gpu-a's label; then someone pointed it at their own key."""
    cluster = sim_cluster(
        [NodeSpec("gpu-a", "L4", 2)], "helm", {"any": PLAIN, "mine": SHARED_3}, "any"
    )
    shared = cli(run_cli, cluster, "--replicas", "2", "--node", "gpu-a")
    assert shared.exit_code == 0, shared.stderr
    assert cluster.client.get("nodes", "gpu-a")["metadata"]["labels"][LABEL] == "kubectl-gpu-ts-2"
    cluster.client.patch("nodes", "gpu-a", {"metadata": {"labels": {LABEL: "mine"}}})
    return cluster


@pytest.mark.parametrize(
    "args",
    [("--replicas", "4", "--node", "gpu-a"), ("off", "--node", "gpu-a")],
    ids=["share", "share-off"],
)
def test_a_hand_edited_node_label_is_refused_unless_forced(
    run_cli: Run, relabelled: SimCluster, args: tuple[str, ...]
) -> None:
    namespace = "nvidia-device-plugin"
    stderr = refused_alike(run_cli, relabelled, args, namespace)
    assert f"the {LABEL} label of node(s) gpu-a changed since kubectl gpu last wrote them" in (
        stderr
    )
    assert f"node gpu-a: {LABEL}=kubectl-gpu-ts-2 last written by kubectl gpu, now mine" in stderr
    assert "--force" in stderr and "--node gpu-a --key mine" in stderr  # how to go on

    forced = cli(run_cli, relabelled, *args, "--force")

    assert forced.exit_code == 0, forced.stderr
    assert "--force: overwriting what was edited since kubectl gpu wrote it:" in forced.stderr
    assert f"  node gpu-a: {LABEL}=kubectl-gpu-ts-2 last written by kubectl gpu, now mine" in (
        forced.stderr
    )
    assert relabelled.client.get("nodes", "gpu-a")["metadata"]["labels"][LABEL] != "mine"


# ---- the ClusterPolicy's devicePlugin.config (the GPU Operator) -----------------------------


@pytest.fixture
def repointed(run_cli: Run, sim_cluster: MakeSimCluster) -> SimCluster:
    """`share` set the ClusterPolicy's config (the operator's default install names none);
    then someone made a default key of their own and pointed the ClusterPolicy at it."""
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1, gpu_taint=True)], "gpu-operator")
    shared = cli(run_cli, cluster, "--replicas", "2")
    assert shared.exit_code == 0, shared.stderr
    config = policy_config(cluster)
    assert config == {"name": "device-plugin-config", "default": "default"}
    cluster.client.patch(
        "configmaps", config["name"], {"data": {"hand-made": PLAIN}}, namespace=OPERATOR_NS
    )
    cluster.client.patch(
        "clusterpolicies",
        "cluster-policy",
        {"spec": {"devicePlugin": {"config": {**config, "default": "hand-made"}}}},
    )
    return cluster


def policy_config(cluster: SimCluster) -> Any:
    policy = cluster.client.get("clusterpolicies.nvidia.com", "cluster-policy")
    return policy["spec"]["devicePlugin"].get("config")


@pytest.mark.parametrize(
    "args",
    [("--replicas", "4", "--key", "default"), ("off", "--key", "default")],
    ids=["share", "share-off"],
)
def test_a_hand_edited_cluster_policy_config_is_refused_unless_forced(
    run_cli: Run, repointed: SimCluster, args: tuple[str, ...]
) -> None:
    stderr = refused_alike(run_cli, repointed, args, OPERATOR_NS)
    assert (
        "ClusterPolicy cluster-policy's spec.devicePlugin.config changed since kubectl gpu last "
        "wrote them" in stderr
    )
    assert (
        "ClusterPolicy cluster-policy spec.devicePlugin.config: {name: device-plugin-config, "
        "default: default} last written by kubectl gpu, now {name: device-plugin-config, "
        "default: hand-made}" in stderr
    )
    assert "--force" in stderr and "drop --key/--configmap" in stderr  # how to go on

    forced = cli(run_cli, repointed, *args, "--force")

    assert forced.exit_code == 0, forced.stderr
    assert "--force: overwriting what was edited since kubectl gpu wrote it:" in forced.stderr
    assert (
        "  ClusterPolicy cluster-policy spec.devicePlugin.config: {name: device-plugin-config"
        in (forced.stderr)
    )
    assert policy_config(repointed)["default"] == "default"
