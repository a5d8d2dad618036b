"""The simulated DaemonSet controller, checked through the real kubectl."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.apiserver import ObjectKey
from tests.fakes.apiserver.kubectl_cli import KubectlRunner
from tests.fakes.cluster import NodeSpec, SimCluster
from tests.fakes.cluster.fixture import MakeSimCluster, kubectl_for
from tests.fakes.cluster.fixture import sim_cluster as sim_cluster

pytestmark = pytest.mark.kubectl
Obj = dict[str, Any]
TAINT = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}


def agent(name: str, **pod_spec: Any) -> str:
    labels = {"app": name}
    spec = {"containers": [{"name": "agent", "image": "registry.example/agent:1.0"}], **pod_spec}
    return json.dumps(
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": spec},
            },
        }
    )


@pytest.fixture
def cluster(sim_cluster: MakeSimCluster) -> SimCluster:
    return sim_cluster(
        [
            NodeSpec("gpu-a", "H100-SXM5-80GB", 1, labels={"pool": "gpu"}, taints=[TAINT]),
            NodeSpec("gpu-b", "L4", 1, labels={"pool": "gpu"}),
            NodeSpec("gpu-c", "L4", 1, labels={"pool": "gpu"}),
            NodeSpec("cpu-1", labels={"pool": "cpu"}),
        ]
    )


def pods_of(kubectl: KubectlRunner, app: str) -> dict[str, Obj]:
    out = kubectl("get", "pods", "-n", "kube-system", "-l", f"app={app}", "-o", "json")
    assert out.returncode == 0, out.stderr
    return {p["spec"]["nodeName"]: p for p in json.loads(out.stdout)["items"]}


def test_pods_go_only_to_matching_nodes_that_tolerate_their_taints(
    cluster: SimCluster, tmp_path: Path
) -> None:
    kubectl = kubectl_for(cluster, tmp_path)
    kubectl("apply", "-f", "-", stdin=agent("everywhere"))
    kubectl(
        "apply",
        "-f",
        "-",
        stdin=agent(
            "gpu-only",
            nodeSelector={"pool": "gpu"},
            tolerations=[{"key": "dedicated", "operator": "Exists"}],
        ),
    )
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "pool", "operator": "NotIn", "values": ["cpu"]},
                            {"key": "nvidia.com/gpu.present", "operator": "Exists"},
                        ]
                    }
                ]
            }
        }
    }
    kubectl("apply", "-f", "-", stdin=agent("by-affinity", affinity=affinity))
    cluster.settle()
    assert sorted(pods_of(kubectl, "everywhere")) == ["cpu-1", "gpu-b", "gpu-c"]
    assert sorted(pods_of(kubectl, "gpu-only")) == ["gpu-a", "gpu-b", "gpu-c"]
    assert sorted(pods_of(kubectl, "by-affinity")) == ["gpu-b", "gpu-c"]
    pod = pods_of(kubectl, "gpu-only")["gpu-a"]
    assert pod["metadata"]["name"].startswith("gpu-only-") and len(pod["metadata"]["name"]) == 14
    owner = pod["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("DaemonSet", "gpu-only", True)
    assert {"controller-revision-hash", "pod-template-generation", "app"} <= set(
        pod["metadata"]["labels"]
    )
    assert pod["status"]["phase"] == "Running"
    status = pod["status"]["containerStatuses"][0]
    assert (
        status["ready"] and status["imageID"] and status["containerID"].startswith("containerd://")
    )


def test_a_deleted_pod_is_recreated_and_a_node_that_stops_matching_loses_its_pod(
    cluster: SimCluster, tmp_path: Path
) -> None:
    kubectl = kubectl_for(cluster, tmp_path)
    kubectl("apply", "-f", "-", stdin=agent("gpu-only", nodeSelector={"pool": "gpu"}))
    cluster.settle()
    before = pods_of(kubectl, "gpu-only")["gpu-b"]["metadata"]["name"]
    assert kubectl("delete", "pod", "-n", "kube-system", before).returncode == 0
    cluster.settle()
    after = pods_of(kubectl, "gpu-only")
    assert sorted(after) == ["gpu-b", "gpu-c"] and after["gpu-b"]["metadata"]["name"] != before
    kubectl("label", "node", "gpu-c", "pool=cpu", "--overwrite")
    cluster.settle()
    assert sorted(pods_of(kubectl, "gpu-only")) == ["gpu-b"]
    columns = kubectl("get", "ds", "-n", "kube-system", "gpu-only", "--no-headers").stdout.split()
    assert columns[1:6] == ["1", "1", "1", "1", "1"]  # DESIRED CURRENT READY UP-TO-DATE AVAILABLE


def watch_unready(cluster: SimCluster, app: str) -> tuple[list[int], Callable[[], None]]:
    """Record, after every pod change, how many of the DaemonSet's nodes lack a ready pod."""
    seen: list[int] = []

    def on_change(kind: str, key: ObjectKey, obj: Obj) -> None:
        if key.resource != "pods":
            return
        pods = cluster.store.list("pods", "kube-system", label_selector=f"app={app}")
        ready = {
            p["spec"]["nodeName"]
            for p in pods
            if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in p.get("status", {}).get("conditions", [])
            )
        }
        seen.append(3 - len(ready))

    return seen, cluster.store.subscribe(on_change)


@pytest.mark.parametrize("max_unavailable", [None, 2])
def test_rollout_restart_replaces_pods_no_more_than_max_unavailable_at_a_time(
    cluster: SimCluster, tmp_path: Path, max_unavailable: int | None
) -> None:
    kubectl = kubectl_for(cluster, tmp_path)
    ds = json.loads(
        agent("gpu-only", nodeSelector={"pool": "gpu"}, tolerations=[{"operator": "Exists"}])
    )
    # The API stand-in does not default updateStrategy, which `rollout status` needs; state it.
    ds["spec"]["updateStrategy"] = {"type": "RollingUpdate"}
    if max_unavailable:
        ds["spec"]["updateStrategy"]["rollingUpdate"] = {"maxUnavailable": max_unavailable}
    kubectl("apply", "-f", "-", stdin=json.dumps(ds))
    cluster.settle()
    old = {p["metadata"]["name"] for p in pods_of(kubectl, "gpu-only").values()}
    seen, unsubscribe = watch_unready(cluster, "gpu-only")
    try:
        assert (
            kubectl("rollout", "restart", "daemonset/gpu-only", "-n", "kube-system").returncode == 0
        )
        cluster.settle()
    finally:
        unsubscribe()
    now = pods_of(kubectl, "gpu-only")
    assert sorted(now) == ["gpu-a", "gpu-b", "gpu-c"]
    assert not old & {p["metadata"]["name"] for p in now.values()}
    assert max(seen) == (max_unavailable or 1)
    status = kubectl("rollout", "status", "daemonset/gpu-only", "-n", "kube-system", "--timeout=5s")
    assert status.returncode == 0, status.stderr
    assert "successfully rolled out" in status.stdout
    ds_status = cluster.store.get("daemonsets", "gpu-only", "kube-system")["status"]
    assert {
        k: ds_status[k]
        for k in (
            "desiredNumberScheduled",
            "currentNumberScheduled",
            "numberReady",
            "updatedNumberScheduled",
            "numberAvailable",
        )
    } == dict.fromkeys(
        (
            "desiredNumberScheduled",
            "currentNumberScheduled",
            "numberReady",
            "updatedNumberScheduled",
            "numberAvailable",
        ),
        3,
    )
    assert ds_status["observedGeneration"] == 2
    history = kubectl("rollout", "history", "daemonset/gpu-only", "-n", "kube-system").stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]
