"""`mig apply --drain`: the node is cordoned, its GPU pods evicted through the Eviction API,
the layout applied by the agent, the node uncordoned; a PodDisruptionBudget that forbids the
eviction stops the run with the budget named, the node left cordoned with its step recorded,
and `mig recover` undoes that drain.

On the real control plane: `train` belongs to a real ReplicaSet (which adopted it), so the real
ReplicaSet controller replaces an evicted `train` with a pod of its own, the real disruption
controller counts it for the budget, and the real Eviction API answers the drain."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubectl_gpu import keys
from tests.agent.fixtures import agent_pod
from tests.cli import replicasets
from tests.cli.test_map_cluster_on_a_simulated_mig_node import mig_pod
from tests.cli.test_mig_apply_reaches_allocatable import write_config
from tests.conftest import CliResult
from tests.kit.cluster import SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import layouts
from tests.kit.plane.plane import wait_for

Run = Callable[..., CliResult]
BALANCED = {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
OWNER = "train-5d8f"  # the ReplicaSet `train` belongs to


@pytest.fixture
def busy(sim_cluster: MakeSimCluster) -> SimCluster:
    """An H100 node whose GPU pod `train` (label app=train, of a ReplicaSet) runs on the whole
    GPU; the agent's pod runs there."""
    cluster = sim_cluster(["gpu-1=H100-SXM5-80GB:1"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    pod = mig_pod("train", "nvidia.com/gpu")
    pod["metadata"]["labels"] = {"app": "train"}
    cluster.client.create(pod)
    cluster.settle()
    replicasets.adopt(cluster, pod, OWNER)
    agent_pod(cluster, "gpu-1")
    assert cluster.client.get("pods", "train", "default")["status"]["phase"] == "Running"
    return cluster


def apply(run_cli: Run, cluster: SimCluster, tmp_path: Path, *args: str) -> CliResult:
    config = write_config(tmp_path, balanced=BALANCED)
    return run_cli("--kubeconfig", str(cluster.kubeconfig), "mig", "apply", "-f", config,
                   "-c", "balanced", "--node", "gpu-1", *args)  # fmt: skip


def node(cluster: SimCluster) -> dict[str, Any]:
    return cluster.client.get("nodes", "gpu-1")


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
    # where the rollout stands, batch by batch, on stderr (stdout is the JSON document)
    assert (
        "batch 1 of 1: draining and changing the MIG layout on 1 node (gpu-1) (0 of 1 nodes done)"
    ) in result.stderr
    assert (
        "batch 1 of 1: waiting for the MIG actuator to report the new layout on 1 node (gpu-1)"
    ) in result.stderr
    assert "batch 1 of 1 ended: 1 of 1 nodes done" in result.stderr
    replicasets.replacements(busy, OWNER)  # train is gone; its ReplicaSet's new pod may wait
    assert True in cordoned  # it was cordoned on the way
    after = node(busy)
    assert not after["spec"].get("unschedulable")  # and given back
    assert keys.DRAIN_ANNOTATION not in after["metadata"].get("annotations", {})
    assert busy.allocatable("gpu-1", "nvidia.com/mig-1g.10gb") == 2


def test_a_budget_that_forbids_the_eviction_stops_the_run_and_recover_undoes_it(
    run_cli: Run, busy: SimCluster, tmp_path: Path
) -> None:
    replicasets.budget(busy, {"minAvailable": 1, "selector": {"matchLabels": {"app": "train"}}})

    result = apply(run_cli, busy, tmp_path, "--drain", "--drain-timeout", "0.3s")

    assert result.exit_code == 1
    assert "Cannot evict pod as it would violate the pod's disruption budget." in result.stderr
    assert "The disruption budget train-pdb needs 1 healthy pods and has 1 currently" in (
        result.stderr
    )
    assert busy.client.get("pods", "train", "default")  # never deleted
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
    busy.client.patch("nodes", "gpu-1", {"spec": {"unschedulable": True}})
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
    busy.client.patch("nodes", "gpu-1", body)
    background_agent(busy, "gpu-1")

    result = apply(run_cli, busy, tmp_path, "--drain")

    assert result.exit_code == 0, result.stderr
    after = node(busy)
    assert not after["spec"].get("unschedulable")  # ours to give back, as the record said
    assert keys.DRAIN_ANNOTATION not in after["metadata"]["annotations"]


def test_a_drain_that_nothing_would_follow_refuses_before_cordoning(
    run_cli: Run, busy: SimCluster, tmp_path: Path
) -> None:
    busy.client.delete("pods", "kubectl-gpu-agent-gpu-1", keys.NAMESPACE)
    busy.settle()

    result = apply(run_cli, busy, tmp_path, "--drain")

    assert result.exit_code == 1
    assert "no kubectl-gpu agent pod runs on gpu-1, so nothing would act on the change" in (
        result.stderr
    )
    assert "nothing was written" in result.stderr
    assert busy.client.get("pods", "train", "default")  # not evicted
    untouched = node(busy)
    assert not untouched["spec"].get("unschedulable")  # not cordoned
    assert keys.DRAIN_ANNOTATION not in untouched["metadata"].get("annotations", {})
    assert keys.MIG_DESIRED_LABEL not in untouched["metadata"]["labels"]
    dry = apply(run_cli, busy, tmp_path, "--drain", "--dry-run")
    assert dry.exit_code == 1 and "no kubectl-gpu agent pod" in dry.stderr


def test_a_pod_without_a_controller_is_refused_as_kubectl_drain_does_unless_forced(
    run_cli: Run, busy: SimCluster, tmp_path: Path, background_agent: Any
) -> None:
    busy.client.create(mig_pod("notebook", "nvidia.com/gpu"))  # Pending: the GPU is taken
    busy.client.delete("replicasets", OWNER, "default")  # and with it, `train`
    wait_for("train to go", lambda: not busy.client.list("pods", "default", label_selector="app"))
    busy.settle()
    assert busy.client.get("pods", "notebook", "default")["spec"].get("nodeName") == "gpu-1"
    background_agent(busy, "gpu-1")

    refused = apply(run_cli, busy, tmp_path, "--drain")

    assert refused.exit_code == 1
    assert (
        "cannot evict Pods that declare no controller (use --force to override): default/notebook"
    ) in refused.stderr
    assert busy.client.get("pods", "notebook", "default")
    assert not node(busy)["spec"].get("unschedulable")

    forced = apply(run_cli, busy, tmp_path, "--drain", "--force")

    assert forced.exit_code == 0, forced.stderr
    assert "evicting Pods that declare no controller: default/notebook" in forced.stderr
    assert not busy.client.list("pods", "default")
