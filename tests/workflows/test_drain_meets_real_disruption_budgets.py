"""`--drain`'s steps against the real Eviction API: the disruption controller computes the
PodDisruptionBudget, the API server refuses an eviction it would break with 429, KWOK finishes
the pods that were let go, and the drain cordons and uncordons the real Node."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from kubectl_gpu import cluster
from kubectl_gpu.workflows import drain
from kubectl_gpu.workflows.waiting import Timing
from tests.kit.plane.plane import ControlPlane, wait_for

pytestmark = pytest.mark.timeout(180)

Where = tuple[cluster.Api, str, str]  # the client, the node, the namespace (one per test)


@pytest.fixture
def where(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[Where]:
    suffix = "a" if "lets_one" in request.node.name else "b"
    NODE, NS = f"drain-gpu-{suffix}", f"drain-test-{suffix}"  # noqa: N806 - one per test

    def kubectl(*args: str, stdin: str | None = None) -> None:
        subprocess.run(
            [str(control_plane.kubectl), "--kubeconfig", str(control_plane.kubeconfig), *args],
            input=stdin, capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip

    capacity = {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "4"}
    kubectl("create", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}},
        "status": {"capacity": capacity, "allocatable": capacity},
    }))  # fmt: skip
    kubectl("create", "namespace", NS)
    for name in ("train-a", "train-b"):
        kubectl("create", "-f", "-", stdin=json.dumps({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {"app": "train"}},
            "spec": {"nodeName": NODE, "containers": [{"name": "main", "image": "cuda",
                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
        }))  # fmt: skip
    kubectl("create", "-f", "-", stdin=json.dumps({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "train", "namespace": NS},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "train"}}},
    }))  # fmt: skip
    client = cluster.connect(str(control_plane.kubeconfig))

    def budget_counted() -> bool:
        status = (
            client.get(f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/train").get("status")
            or {}
        )
        return status.get("currentHealthy") == 2 and status.get("disruptionsAllowed") == 1

    wait_for("the disruption controller to count both pods", budget_counted)
    try:
        yield client, NODE, NS
    finally:
        # no kubelet finishes a pod's graceful deletion here: without the force, the namespace
        # stays Terminating until the pod garbage collector finds the node gone, and the next
        # simulated cluster on this session's plane waits for it
        subprocess.run(
            [str(control_plane.kubectl), "--kubeconfig", str(control_plane.kubeconfig),
             "delete", "pods", "--all", "-n", NS, "--grace-period=0", "--force", "--wait=false"],
            capture_output=True, check=False,
        )  # fmt: skip
        subprocess.run(
            [str(control_plane.kubectl), "--kubeconfig", str(control_plane.kubeconfig),
             "delete", "namespace", NS, "--wait=false"], capture_output=True, check=False,
        )  # fmt: skip
        subprocess.run(
            [str(control_plane.kubectl), "--kubeconfig", str(control_plane.kubeconfig),
             "delete", "node", NODE, "--wait=false"], capture_output=True, check=False,
        )  # fmt: skip


def test_the_budget_lets_one_pod_go_and_the_drain_stops_naming_it(where: Where) -> None:
    api, NODE, NS = where  # noqa: N806
    plan = drain.Drain("mig apply all-1g@test", timeout=3, timing=Timing(poll=0.3))
    pods = [f"{NS}/train-a", f"{NS}/train-b"]

    drain.begin(api, NODE, plan, pods)
    assert api.get(cluster.path("nodes", NODE))["spec"]["unschedulable"] is True
    with pytest.raises(drain.DrainBlocked) as blocked:
        drain.evict(api, NODE, plan, pods)

    message = str(blocked.value)
    assert f"could not evict {NS}/train-b" in message
    assert "disruption budget" in message  # the real server's own words
    gone = [p for p in ("train-a", "train-b") if not _exists(api, p, NS)]
    assert gone == ["train-a"]  # the first eviction was allowed, and KWOK let the pod go


def test_once_the_budget_allows_it_the_drain_finishes_and_uncordons(where: Where) -> None:
    api, NODE, NS = where  # noqa: N806
    plan = drain.Drain("mig apply all-1g@test", timeout=30, timing=Timing(poll=0.3))
    pods = [f"{NS}/train-a", f"{NS}/train-b"]
    api.patch(
        f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/train", {"spec": {"minAvailable": 0}}
    )

    drain.begin(api, NODE, plan, pods)
    drain.evict(api, NODE, plan, pods)
    drain.finish(api, NODE, plan)

    assert not _exists(api, "train-a", NS) and not _exists(api, "train-b", NS)
    node = api.get(cluster.path("nodes", NODE))
    assert not node["spec"].get("unschedulable")
    assert drain.record_of(node) == {}


def _exists(api: cluster.Api, name: str, namespace: str) -> bool:
    try:
        api.get(cluster.path("pods", name, namespace))
    except Exception:
        return False
    return True
