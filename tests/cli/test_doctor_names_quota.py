"""doctor names the admission layer, with the quota's numbers, when a GPU quota refuses pods.

On the real control plane: the quota controller keeps each ResourceQuota's status, the quota
admission plugin refuses the pod that would exceed it, and the real ReplicaSet controller
reports that refusal as its FailedCreate event (nothing here is written by hand)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tests.cli.doctorpods import by_layer, gpu_pod, run_pods
from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.plane.plane import wait_for

Run = Callable[..., CliResult]
GPU_QUOTA = "requests.nvidia.com/gpu"
# the quota admission plugin's words, as the ReplicaSet controller's event carries them (the
# event recorder's correlator prefixes a message that stands for several similar refusals)
REFUSED = re.compile(
    r"(?:\(combined from similar events\): )?"
    r'Error creating: pods "(?P<pod>train-[a-z0-9]+-[a-z0-9]+)" is forbidden: exceeded quota: '
    r"gpus, requested: requests\.nvidia\.com/gpu=1, used: requests\.nvidia\.com/gpu=4, "
    r"limited: requests\.nvidia\.com/gpu=4$"
)


def quota(cluster: SimCluster, name: str, hard: str) -> None:
    """A GPU quota, once the quota controller has given it a status (until then the admission
    plugin refuses every pod in the namespace: "status unknown for quota")."""
    cluster.client.create({
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"hard": {GPU_QUOTA: hard}},
    })  # fmt: skip
    wait_for(f"quota {name}'s status", lambda: _status(cluster, name).get("hard"))


def _status(cluster: SimCluster, name: str) -> dict[str, Any]:
    return cluster.client.get("resourcequotas", name, "default").get("status") or {}


def _used(cluster: SimCluster, name: str) -> str:
    return str((_status(cluster, name).get("used") or {}).get(GPU_QUOTA, ""))


def replica_set(name: str, replicas: int) -> dict[str, Any]:
    """`replicas` pods of one GPU each."""
    template = gpu_pod("unused")
    return {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": template["spec"]}},
    }  # fmt: skip


def failed_create(cluster: SimCluster) -> str:
    """The ReplicaSet controller's FailedCreate message, once it has one."""

    def message() -> str:
        events = cluster.client.list("events", "default")
        found = [e["message"] for e in events if e.get("reason") == "FailedCreate"]
        return found[-1] if found else ""

    return str(wait_for("the ReplicaSet controller's FailedCreate event", message))


def doctor(run_cli: Run, cluster: SimCluster, name: str) -> CliResult:
    return run_cli("--kubeconfig", str(cluster.kubeconfig), "doctor", name, "-o", "json")


def test_a_pod_the_quota_refused_is_explained_with_the_quotas_numbers(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 8)], controllers=())
    quota(cluster, "gpus", "4")
    cluster.client.create(replica_set("train-7d9f4", 5))  # the fifth pod is one too many
    message = failed_create(cluster)
    assert (refused_pod := REFUSED.match(message)), message
    assert _status(cluster, "gpus")["used"] == {GPU_QUOTA: "4"}
    pod = refused_pod["pod"]

    result = doctor(run_cli, cluster, pod)

    assert result.exit_code == 1
    [refused] = by_layer(result.json, "admission")
    assert refused["object"] == f"pod/{pod}"
    assert refused["message"].endswith("a ResourceQuota is exceeded")
    assert refused["evidence"] == [
        f"FailedCreate: {message}",
        "ResourceQuota gpus now: requests.nvidia.com/gpu used 4 of 4",
    ]
    assert "kubectl edit resourcequota gpus" in refused["fix"]


def test_a_running_pod_is_warned_that_its_replacement_would_not_fit(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 2)], "helm", {"any": "version: v1\n"}, "any")
    quota(cluster, "gpus", "2")
    run_pods(cluster, gpu_pod("train", "2"))
    wait_for("the quota to count train", lambda: _used(cluster, "gpus") == "2")
    result = doctor(run_cli, cluster, "train")
    [full] = by_layer(result.json, "admission", "warning")
    assert full["object"] == "resourcequota/gpus"
    assert full["evidence"] == [f"used {GPU_QUOTA}=2, hard {GPU_QUOTA}=2"]
    quota(cluster, "more", "8")
    wait_for("quota more to count train", lambda: _used(cluster, "more") == "2")
    assert [
        d["object"]
        for d in by_layer(doctor(run_cli, cluster, "train").json, "admission", "warning")
    ] == ["resourcequota/gpus"]
