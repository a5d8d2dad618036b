"""`mig apply --drain`: the node is cordoned, its GPU pods evicted through the Eviction API,
the layout applied by the agent, the node uncordoned; a PodDisruptionBudget that forbids the
eviction stops the run with the budget named, the node left cordoned with its step recorded,
and `mig recover` undoes that drain."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubectl_gpu import keys
from tests.agent.conftest import agent as agent  # noqa: F401 (fixture)
from tests.cli.test_map_cluster_on_a_simulated_mig_node import mig_pod
from tests.cli.test_mig_apply_reaches_allocatable import background_agent as background_agent
from tests.cli.test_mig_apply_reaches_allocatable import write_config
from tests.conftest import CliResult
from tests.fakes.cluster import SimCluster, layouts
from tests.fakes.cluster.fixture import MakeSimCluster
from tests.fakes.cluster.fixture import sim_cluster as sim_cluster

Run = Callable[..., CliResult]
pytestmark = pytest.mark.timeout(120)  # each test starts a cluster on a real control plane
BALANCED = {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}


@pytest.fixture
def busy(sim_cluster: MakeSimCluster) -> SimCluster:  # noqa: F811
    """An H100 node whose GPU pod `train` (label app=train) runs on the whole GPU."""
    cluster = sim_cluster(
        ["gpu-1=H100-SXM5-80GB:1"], layouts.helm(env={"MIG_STRATEGY": "mixed"}), backend="real"
    )
    pod = mig_pod("train", "nvidia.com/gpu")
    pod["metadata"]["labels"] = {"app": "train"}
    cluster.store.create(pod)
    cluster.settle()
    assert cluster.store.get("pods", "train", "default")["status"]["phase"] == "Running"
    return cluster


def budget(min_available: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "train-pdb", "namespace": "default"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "train"}}},
    }


def apply(run_cli: Run, cluster: SimCluster, tmp_path: Path, *args: str) -> CliResult:
    config = write_config(tmp_path, balanced=BALANCED)
    return run_cli("--kubeconfig", str(cluster.kubeconfig), "mig", "apply", "-f", config,
                   "-c", "balanced", "--node", "gpu-1", *args)  # fmt: skip


def node(cluster: SimCluster) -> dict[str, Any]:
    return cluster.store.get("nodes", "gpu-1")


def test_drain_evicts_applies_and_uncordons(
    run_cli: Run, busy: SimCluster, tmp_path: Path, background_agent: Any
) -> None:
    cordoned: list[bool] = []
    busy.store.subscribe(
        lambda kind, key, obj: (
            cordoned.append(bool(obj["spec"].get("unschedulable")))
            if obj.get("kind") == "Node"
            else None
        )
    )
    background_agent(busy, "gpu-1")

    result = apply(run_cli, busy, tmp_path, "--drain", "-o", "json")

    assert result.exit_code == 0, result.stderr
    [row] = result.json["nodes"]
    assert row["result"] == "success"
    assert "evicted pod default/train" in result.stderr
    assert [p["metadata"]["name"] for p in busy.store.list("pods", "default")] == []
    assert True in cordoned  # it was cordoned on the way
    after = node(busy)
    assert not after["spec"].get("unschedulable")  # and given back
    assert keys.DRAIN_ANNOTATION not in after["metadata"].get("annotations", {})
    assert busy.allocatable("gpu-1", "nvidia.com/mig-1g.10gb") == 2


def test_a_budget_that_forbids_the_eviction_stops_the_run_and_recover_undoes_it(
    run_cli: Run, busy: SimCluster, tmp_path: Path
) -> None:
    busy.store.create(budget(1))

    result = apply(run_cli, busy, tmp_path, "--drain", "--drain-timeout", "0.3s")

    assert result.exit_code == 1
    assert "Cannot evict pod as it would violate the pod's disruption budget." in result.stderr
    assert "The disruption budget train-pdb needs 1 healthy pods and has 1 currently" in (
        result.stderr
    )
    assert busy.store.get("pods", "train", "default")  # never deleted
    stopped = node(busy)
    assert stopped["spec"]["unschedulable"] is True
    record = json.loads(stopped["metadata"]["annotations"][keys.DRAIN_ANNOTATION])
    assert (record["step"], record["cordoned"], record["pods"]) == (
        "evicting",
        True,
        ["default/train"],
    )
    assert keys.MIG_DESIRED_LABEL not in stopped["metadata"]["labels"]  # nothing applied

    status = run_cli("--kubeconfig", str(busy.kubeconfig), "mig", "status", "-o", "json")
    assert status.json["nodes"][0]["stuck"][0].startswith("a drain for mig apply balanced@")
    undo = run_cli("--kubeconfig", str(busy.kubeconfig), "mig", "recover", "gpu-1")
    assert undo.exit_code == 0, undo.stderr
    assert "next: node gpu-1 is back in use and mig apply balanced@" in undo.stderr
    back = node(busy)
    assert not back["spec"].get("unschedulable")
    assert keys.DRAIN_ANNOTATION not in back["metadata"]["annotations"]
    assert keys.MIG_STATE_LABEL not in back["metadata"]["labels"]  # no MIG change had begun


def test_a_node_cordoned_before_the_drain_stays_cordoned(
    run_cli: Run, busy: SimCluster, tmp_path: Path, background_agent: Any
) -> None:
    busy.store.patch("nodes", "gpu-1", {"spec": {"unschedulable": True}})
    background_agent(busy, "gpu-1")
    result = apply(run_cli, busy, tmp_path, "--drain")
    assert result.exit_code == 0, result.stderr
    assert node(busy)["spec"]["unschedulable"] is True  # the admin's cordon is theirs


def test_an_interrupted_drain_is_resumed_by_running_it_again(
    run_cli: Run, busy: SimCluster, tmp_path: Path, background_agent: Any
) -> None:
    # A run that was killed after it cordoned the node: its record says the cordon is ours.
    record = {"change": "mig apply balanced@000000000000", "step": "evicting", "cordoned": True,
              "pods": ["default/train"], "since": "2026-01-01T00:00:00Z"}  # fmt: skip
    body = {
        "spec": {"unschedulable": True},
        "metadata": {"annotations": {keys.DRAIN_ANNOTATION: json.dumps(record)}},
    }
    busy.store.patch("nodes", "gpu-1", body)
    background_agent(busy, "gpu-1")

    result = apply(run_cli, busy, tmp_path, "--drain")

    assert result.exit_code == 0, result.stderr
    after = node(busy)
    assert not after["spec"].get("unschedulable")  # ours to give back, as the record said
    assert keys.DRAIN_ANNOTATION not in after["metadata"]["annotations"]
