"""One GPU shared three ways: scheduling, admission and device IDs as a user sees them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubectl_gpu.doctor import placement
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster, kubectl_for

pytestmark = pytest.mark.kubectl

REPLICAS_3 = """version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 3
"""
PREEMPTION_3 = (
    "0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is "
    "not helpful for scheduling."
)


def gpu_pod(name: str, gpus: int = 1, node: str = "") -> str:
    spec: dict[str, object] = {
        "containers": [
            {
                "name": "cuda",
                "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
            }
        ],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    if node:
        spec["nodeName"] = node
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})


@pytest.fixture
def one_gpu(sim_cluster: MakeSimCluster) -> SimCluster:
    return sim_cluster(
        [NodeSpec("gpu-1", "L4", 1, gpu_taint=True), NodeSpec("cpu-1"), NodeSpec("cpu-2")],
        layout="helm",
        configs={"default": "version: v1\n", "replicas-3": REPLICAS_3},
        default_config="default",
    )


def test_three_pods_share_one_gpu_and_a_fourth_waits(one_gpu: SimCluster, tmp_path: Path) -> None:
    kubectl = kubectl_for(one_gpu, tmp_path)
    assert one_gpu.allocatable("gpu-1") == 1
    assert (
        kubectl("label", "node", "gpu-1", "nvidia.com/device-plugin.config=replicas-3").returncode
        == 0
    )
    one_gpu.settle()
    assert (one_gpu.capacity("gpu-1"), one_gpu.allocatable("gpu-1")) == (3, 3)

    for name in ("train-0", "train-1", "train-2", "train-3"):
        assert kubectl("apply", "-f", "-", stdin=gpu_pod(name)).returncode == 0
    one_gpu.settle()

    pods = json.loads(kubectl("get", "pods", "-o", "json").stdout)["items"]
    phases = {p["metadata"]["name"]: p["status"]["phase"] for p in pods}
    assert phases == {
        "train-0": "Running",
        "train-1": "Running",
        "train-2": "Running",
        "train-3": "Pending",
    }
    gpu_uuid = one_gpu.node_gpus("gpu-1")[0].uuid
    given = sorted(i for a in one_gpu.allocations("gpu-1") for i in a.device_ids)
    assert given == [f"{gpu_uuid}::0", f"{gpu_uuid}::1", f"{gpu_uuid}::2"]
    assert {a.pod for a in one_gpu.allocations("gpu-1")} == {"train-0", "train-1", "train-2"}

    events = json.loads(
        kubectl(
            "get", "events", "--field-selector", "involvedObject.name=train-3", "-o", "json"
        ).stdout
    )["items"]
    failed = [e for e in events if e["reason"] == "FailedScheduling"]
    # The CPU nodes have no nvidia.com/gpu at all: kube-scheduler counts them as Insufficient too
    # (and says preemption would not help there, which our scheduler stand-in got wrong). 1.34
    # adds "no new claims to deallocate, " before the preemption part: doctor reads past it.
    fit = placement.parse_fit_error(failed[0]["message"])
    assert fit is not None, failed[0]["message"]
    assert (fit.total, fit.reasons) == (3, ((3, "Insufficient nvidia.com/gpu"),)), fit
    assert fit.preemption == PREEMPTION_3, fit
    assert failed[0]["type"] == "Warning"
    # the real scheduler writes events.k8s.io events: no `source`, a reporting component
    assert failed[0]["reportingComponent"] == "default-scheduler"


def test_a_deleted_pod_frees_its_replica_for_the_waiting_one(
    one_gpu: SimCluster, tmp_path: Path
) -> None:
    kubectl = kubectl_for(one_gpu, tmp_path)
    one_gpu.store.patch(
        "nodes",
        "gpu-1",
        {"metadata": {"labels": {"nvidia.com/device-plugin.config": "replicas-3"}}},
    )
    for name in ("a", "b", "c", "d"):
        kubectl("apply", "-f", "-", stdin=gpu_pod(name))
    one_gpu.settle()
    freed = next(a.device_ids for a in one_gpu.allocations("gpu-1") if a.pod == "b")
    assert kubectl("delete", "pod", "b", "--wait=false").returncode == 0
    one_gpu.settle()
    assert one_gpu.store.get("pods", "d", "default")["status"]["phase"] == "Running"
    assert next(a.device_ids for a in one_gpu.allocations("gpu-1") if a.pod == "d") == freed


def test_untolerated_taint_is_counted_in_the_scheduler_event(
    sim_cluster: MakeSimCluster, tmp_path: Path
) -> None:
    cluster = sim_cluster(
        [NodeSpec("gpu-1", "H100-SXM5-80GB", 1, gpu_taint=True), NodeSpec("cpu-1")], layout="static"
    )
    kubectl = kubectl_for(cluster, tmp_path)
    pod = json.loads(gpu_pod("no-toleration"))
    del pod["spec"]["tolerations"]
    kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    cluster.settle()
    described = kubectl("describe", "pod", "no-toleration").stdout
    assert "FailedScheduling" in described
    # Kubernetes 1.37's scheduler counts the node but no longer names the taint ("untolerated
    # taint(s)"); our scheduler stand-in printed "untolerated taint {nvidia.com/gpu: present}"
    # (1.34 too, with "no new claims to deallocate, " before the preemption part).
    events = kubectl(
        "get", "events", "--field-selector", "involvedObject.name=no-toleration", "-o", "json"
    ).stdout
    [message] = {
        e["message"] for e in json.loads(events)["items"] if e["reason"] == "FailedScheduling"
    }
    assert message in " ".join(described.split())
    fit = placement.parse_fit_error(message)
    assert fit is not None, message
    assert (fit.total, fit.reasons) == (
        2,
        ((1, "Insufficient nvidia.com/gpu"), (1, "node(s) had untolerated taint(s)")),
    ), fit
    assert fit.preemption == "0/2 nodes are available: 2 Preemption is not helpful for scheduling."


def test_pod_pinned_past_the_scheduler_fails_admission_like_kubelet(
    one_gpu: SimCluster, tmp_path: Path
) -> None:
    kubectl = kubectl_for(one_gpu, tmp_path)
    kubectl("apply", "-f", "-", stdin=gpu_pod("first", node="gpu-1"))
    kubectl("apply", "-f", "-", stdin=gpu_pod("second", node="gpu-1"))
    one_gpu.settle()
    second = one_gpu.store.get("pods", "second", "default")["status"]
    assert second["phase"] == "Failed"
    assert second["reason"] == "UnexpectedAdmissionError"
    assert second["message"] == (
        "Pod was rejected: Allocate failed due to requested number of devices unavailable for "
        "nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected"
    )
    listed = kubectl("get", "pod", "second").stdout
    assert "UnexpectedAdmissionError" in listed
    assert [a.pod for a in one_gpu.allocations("gpu-1")] == ["first"]


def test_mps_refuses_a_request_for_two_replicas_at_admission(
    sim_cluster: MakeSimCluster, tmp_path: Path
) -> None:
    mps = REPLICAS_3.replace("timeSlicing", "mps")  # failRequestsGreaterThanOne defaults to true
    cluster = sim_cluster([NodeSpec("gpu-1", "H100-SXM5-80GB", 1)], layout="helm",
                          configs={"mps": mps})  # fmt: skip
    assert cluster.allocatable("gpu-1") == 3
    kubectl = kubectl_for(cluster, tmp_path)
    kubectl("apply", "-f", "-", stdin=gpu_pod("greedy", gpus=2))
    cluster.settle()
    status = cluster.store.get("pods", "greedy", "default")["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "UnexpectedAdmissionError")
    assert "maximum request size for shared resources is 1; found 2" in status["message"]


def test_allocations_feed_the_podresources_stand_in(one_gpu: SimCluster, tmp_path: Path) -> None:
    kubectl = kubectl_for(one_gpu, tmp_path)
    kubectl("apply", "-f", "-", stdin=gpu_pod("solo"))
    one_gpu.settle()
    pods, allocatable = one_gpu.podresources("gpu-1")
    solo = next(p for p in pods if p.name == "solo")
    uuid = one_gpu.node_gpus("gpu-1")[0].uuid
    assert [(d.resource, d.ids) for d in solo.containers[0].devices] == [
        ("nvidia.com/gpu", (uuid,))
    ]
    assert solo.uid == one_gpu.store.get("pods", "solo", "default")["metadata"]["uid"]
    assert [(d.resource, d.ids) for d in allocatable.devices] == [("nvidia.com/gpu", (uuid,))]
