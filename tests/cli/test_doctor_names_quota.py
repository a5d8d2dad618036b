"""doctor names the admission layer, with the quota's numbers, when a GPU quota refuses pods.

On the API server stand-in: the tests write the quota's status and the ReplicaSet controller's
FailedCreate event by hand; on a real server the quota controller recalculates `used` at once
(it said 0 of 4), so moving them means filling a real quota with real pods first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.cli.doctorpods import by_layer, gpu_pod, run_pods
from tests.conftest import CliResult
from tests.fakes.cluster import NodeSpec, SimCluster
from tests.fakes.cluster.fixture import MakeSimCluster
from tests.fakes.cluster.fixture import sim_cluster as sim_cluster

Run = Callable[..., CliResult]
GPU_QUOTA = "requests.nvidia.com/gpu"
REFUSED = (
    'Error creating: pods "train-7d9f4-x2x8q" is forbidden: exceeded quota: gpus, requested: '
    "requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=4"
)


def quota(hard: str, used: str) -> dict[str, Any]:
    """As the quota controller leaves it: spec.hard, and status.hard/used it recalculated."""
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpus", "namespace": "default"},
        "spec": {"hard": {GPU_QUOTA: hard}},
        "status": {"hard": {GPU_QUOTA: hard}, "used": {GPU_QUOTA: used}},
    }


def failed_create() -> dict[str, Any]:
    """The ReplicaSet controller's event when the API server refused its pod."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "train-7d9f4.181f0c2a", "namespace": "default"},
        "involvedObject": {
            "kind": "ReplicaSet",
            "namespace": "default",
            "name": "train-7d9f4",
            "apiVersion": "apps/v1",
        },
        "reason": "FailedCreate",
        "message": REFUSED,
        "type": "Warning",
        "source": {"component": "replicaset-controller"},
        "count": 7,
        "lastTimestamp": "2026-01-01T00:00:00Z",
    }


def doctor(run_cli: Run, cluster: SimCluster, name: str) -> CliResult:
    return run_cli("--kubeconfig", str(cluster.kubeconfig), "doctor", name, "-o", "json")


def test_a_pod_the_quota_refused_is_explained_with_the_quotas_numbers(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 8)], controllers=())
    cluster.store.create(quota("4", "4"))
    cluster.store.create(failed_create())
    assert cluster.store.get("resourcequotas", "gpus", "default")["status"]["used"] == {
        GPU_QUOTA: "4"
    }
    result = doctor(run_cli, cluster, "train-7d9f4-x2x8q")
    assert result.exit_code == 1
    [refused] = by_layer(result.json, "admission")
    assert refused["object"] == "pod/train-7d9f4-x2x8q"
    assert refused["message"].endswith("a ResourceQuota is exceeded")
    assert refused["evidence"] == [
        f"FailedCreate: {REFUSED}",
        "ResourceQuota gpus now: requests.nvidia.com/gpu used 4 of 4",
    ]
    assert "kubectl edit resourcequota gpus" in refused["fix"]


def test_a_running_pod_is_warned_that_its_replacement_would_not_fit(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 2)], "helm", {"any": "version: v1\n"}, "any")
    cluster.store.create(quota("2", "2"))
    run_pods(cluster, gpu_pod("train", "2"))
    result = doctor(run_cli, cluster, "train")
    [full] = by_layer(result.json, "admission", "warning")
    assert full["object"] == "resourcequota/gpus"
    assert full["evidence"] == [f"used {GPU_QUOTA}=2, hard {GPU_QUOTA}=2"]
    roomy = quota("8", "2")
    roomy["metadata"]["name"] = "more"
    cluster.store.create(roomy)
    assert [
        d["object"]
        for d in by_layer(doctor(run_cli, cluster, "train").json, "admission", "warning")
    ] == ["resourcequota/gpus"]
