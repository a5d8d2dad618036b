"""A sharing change that takes a resource from running pods is refused with their names unless
--drain (evict them through the Eviction API before anything is written, roll out, wait for
the new capacity, uncordon) or --force; a PodDisruptionBudget that forbids the eviction stops
the run before any write, names the budget and leaves the node cordoned with its step
recorded; running the command again once the budget allows resumes and gives the node back.

On the real control plane: `train` belongs to a real ReplicaSet (which adopted it), the real
disruption controller counts the budgets, and the real Eviction API answers the drain."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from kubectl_gpu import keys
from tests.cli import replicasets
from tests.cli.doctorpods import gpu_pod, run_pods
from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

Run = Callable[..., CliResult]
RENAME = ("--replicas", "2", "--rename-by-default")
OWNER = "train-5d8f"  # the ReplicaSet `train` belongs to
TRAIN = {"matchLabels": {"app": "train"}}


@pytest.fixture
def used(sim_cluster: MakeSimCluster) -> SimCluster:
    """One L4 held by `train` (app=train) under the GPU Operator."""
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1, gpu_taint=True)], "gpu-operator")
    pod = gpu_pod("train", tolerate=True)
    pod["metadata"]["labels"] = {"app": "train"}
    run_pods(cluster, pod)
    replicasets.adopt(cluster, pod, OWNER)
    return cluster


def share(run_cli: Run, cluster: SimCluster, *args: str) -> CliResult:
    return run_cli("--kubeconfig", str(cluster.kubeconfig), "share", *args)


def configmaps(cluster: SimCluster) -> list[dict[str, Any]]:
    return [c["data"] for c in cluster.client.list("configmaps", "gpu-operator")]


def test_a_change_that_takes_the_pods_resource_is_refused_by_name(
    run_cli: Run, used: SimCluster
) -> None:
    before = configmaps(used)
    result = share(run_cli, used, *RENAME)
    assert result.exit_code == 1
    assert (
        "error: running pods would lose their resource; nothing was written (1):\n"
        "  default/train: uses nvidia.com/gpu, which disappears (1 → 0)\n" in result.stderr
    )
    assert "--drain" in result.stderr and "--force" in result.stderr
    assert configmaps(used) == before

    forced = share(run_cli, used, *RENAME, "--force", "--wait", "--timeout", "10s")
    assert forced.exit_code == 0, forced.stderr
    assert used.allocatable("gpu-a", "nvidia.com/gpu.shared") == 2


def test_drain_evicts_restarts_waits_and_uncordons(run_cli: Run, used: SimCluster) -> None:
    result = share(run_cli, used, *RENAME, "--drain", "--timeout", "10s", "-o", "json")
    assert result.exit_code == 0, result.stderr
    [row] = result.json["nodes"]
    assert (row["result"], row["after"]) == ("verified", 2)
    assert "evicted pod default/train" in result.stderr
    replicasets.replacements(used, OWNER)  # train is gone; its ReplicaSet's new pod waits
    node = used.client.get("nodes", "gpu-a")
    assert not node["spec"].get("unschedulable")
    assert keys.DRAIN_ANNOTATION not in node["metadata"].get("annotations", {})


def test_a_budget_stops_the_rollout_and_the_node_stays_cordoned(
    run_cli: Run, used: SimCluster
) -> None:
    replicasets.budget(used, {"maxUnavailable": 0, "selector": TRAIN})
    before = configmaps(used)
    result = share(run_cli, used, *RENAME, "--drain", "--drain-timeout", "0.3s")
    assert result.exit_code == 1
    assert "; nothing was written" in result.stderr
    assert configmaps(used) == before  # drained before any write: the plugin never restarted
    assert used.allocatable("gpu-a") == 1
    # the server's cause names the budget; its wording follows the disruption controller's
    # status (a bare pod under maxUnavailable: "does not allow evicting pods currently")
    assert "Cannot evict pod as it would violate the pod's disruption budget." in result.stderr
    assert "The disruption budget train-pdb " in result.stderr
    assert used.client.get("pods", "train", "default")
    node = used.client.get("nodes", "gpu-a")
    assert node["spec"]["unschedulable"] is True
    record = json.loads(node["metadata"]["annotations"][keys.DRAIN_ANNOTATION])
    assert record["step"] == "evicting" and record["cordoned"] is True
    assert "could not evict default/train" in record["reason"]


def test_running_it_again_once_the_budget_allows_resumes_and_gives_the_node_back(
    run_cli: Run, used: SimCluster
) -> None:
    replicasets.budget(used, {"minAvailable": 1, "selector": TRAIN})
    assert share(run_cli, used, *RENAME, "--drain", "--drain-timeout", "0.3s").exit_code == 1
    used.client.delete("poddisruptionbudgets", "train-pdb", "default")

    again = share(run_cli, used, *RENAME, "--drain", "--timeout", "10s")

    assert again.exit_code == 0, again.stderr
    node = used.client.get("nodes", "gpu-a")
    assert not node["spec"].get("unschedulable")  # the earlier run's cordon, given back
    assert keys.DRAIN_ANNOTATION not in node["metadata"].get("annotations", {})
    assert used.allocatable("gpu-a", "nvidia.com/gpu.shared") == 2


def test_drain_refuses_a_pod_without_a_controller_before_cordoning_unless_forced(
    run_cli: Run,
    sim_cluster: MakeSimCluster,
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1, gpu_taint=True)], "gpu-operator")
    run_pods(cluster, gpu_pod("notebook", tolerate=True))  # no controller recreates it

    refused = share(run_cli, cluster, *RENAME, "--drain", "--timeout", "10s")

    assert refused.exit_code == 1
    assert (
        "node gpu-a: cannot evict Pods that declare no controller (use --force to override): "
        "default/notebook; nothing was written, no node was cordoned"
    ) in refused.stderr
    node = cluster.client.get("nodes", "gpu-a")
    assert not node["spec"].get("unschedulable")
    assert keys.DRAIN_ANNOTATION not in node["metadata"].get("annotations", {})
    assert cluster.client.get("pods", "notebook", "default")
    dry = share(run_cli, cluster, *RENAME, "--drain", "--dry-run")
    assert dry.exit_code == 1 and "declare no controller" in dry.stderr

    forced = share(run_cli, cluster, *RENAME, "--drain", "--force", "--timeout", "10s")

    assert forced.exit_code == 0, forced.stderr
    assert "evicting Pods that declare no controller: default/notebook" in forced.stderr
    assert cluster.client.list("pods", "default") == []


def test_mig_recover_undoes_a_stopped_share_drain_without_a_mig_failure(
    run_cli: Run, used: SimCluster
) -> None:
    replicasets.budget(used, {"maxUnavailable": 0, "selector": TRAIN})
    assert share(run_cli, used, *RENAME, "--drain", "--drain-timeout", "0.3s").exit_code == 1

    undo = run_cli("--kubeconfig", str(used.kubeconfig), "mig", "recover", "gpu-a")

    assert undo.exit_code == 0, undo.stderr
    header, row = undo.stdout.splitlines()
    assert "RESTORED" in header and "uncordoned" in row, undo.stdout  # the table says what
    node = used.client.get("nodes", "gpu-a")
    assert not node["spec"].get("unschedulable")
    annotations, labels = node["metadata"].get("annotations", {}), node["metadata"]["labels"]
    assert keys.DRAIN_ANNOTATION not in annotations
    assert keys.MIG_REASON_ANNOTATION not in annotations  # no MIG change had begun
    assert keys.MIG_STATE_LABEL not in labels and keys.MIG_CONFIG_STATE_LABEL not in labels
