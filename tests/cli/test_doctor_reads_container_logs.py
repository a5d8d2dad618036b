"""doctor reads the end of a GPU pod's container logs and names the runtime or driver from them.

On the real control plane: the logs are files KWOK serves where the API server expects the node's
kubelet, so `tailLines`, `limitBytes`, `previous` and a missing previous run are answered by the
real API server and a kubelet-like server; the refusal is the real RBAC authorizer's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.cli.doctorpods import by_layer, gpu_pod, run_pods
from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import ApiError
from tests.kit.plane.plane import wait_for

pytestmark = pytest.mark.timeout(120)

Run = Callable[..., CliResult]
NO_DEVICE = "RuntimeError: No CUDA-capable device is detected"
TOO_OLD = (
    "CUDA error: CUDA driver version is insufficient for CUDA runtime version "
    "(cudaErrorInsufficientDriver)"
)


def doctor(run_cli: Run, cluster: SimCluster, name: str) -> CliResult:
    return run_cli("--kubeconfig", str(cluster.kubeconfig), "doctor", name, "-o", "json")


@pytest.fixture
def running(sim_cluster: MakeSimCluster) -> SimCluster:
    """A GPU pod the kubelet started on gpu-a, whose program found no GPU."""
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)], "helm", {"any": "version: v1\n"}, "any")
    run_pods(cluster, gpu_pod("train"))
    assert cluster.client.get("pods", "train", "default")["status"]["phase"] == "Running"
    filler = "".join(f"step {i}\n" for i in range(200))
    cluster.keep_log("default", "train", "cuda", f"{NO_DEVICE}\n{filler}")
    return cluster


def test_a_started_pod_whose_log_finds_no_gpu_names_the_runtime(
    run_cli: Run, running: SimCluster
) -> None:
    cluster = running
    cluster.keep_log("default", "train", "cuda", f"loading weights\n{NO_DEVICE}\n")
    result = doctor(run_cli, cluster, "train")
    assert result.exit_code == 1
    [runtime] = by_layer(result.json, "runtime")
    assert runtime["message"] == "the container runs without a GPU: CUDA finds no device"
    assert runtime["evidence"] == [f"container cuda log: {NO_DEVICE}"]
    assert "runtimeClassName" in runtime["fix"]


def test_only_a_bounded_tail_is_read(run_cli: Run, running: SimCluster) -> None:
    # The error is 200 lines back: beyond the 50-line tail, so it is not seen.
    assert running.plane is not None
    before = len(running.plane.audit())  # the session's plane: earlier tests' requests too
    result = doctor(run_cli, running, "train")
    assert result.exit_code == 0, result.stdout
    [read] = [
        e["requestURI"]
        for e in running.plane.audit()[before:]
        if e.get("stage") == "RequestReceived"
        and e.get("requestURI", "").startswith("/api/v1/namespaces/default/pods/train/log?")
    ]
    assert "tailLines=50" in read and "limitBytes=65536" in read
    assert "container=cuda" in read and "previous=false" in read


def crash_looping(cluster: SimCluster) -> None:
    """The node's last report: the container exited and waits to restart. KWOK starts the pod;
    then its status says what a kubelet reports of a crash loop (KWOK has no such stage)."""
    pod: dict[str, Any] = gpu_pod("train")
    pod["spec"]["nodeName"] = "gpu-a"
    cluster.client.create(pod, keep_status=False)
    wait_for(
        "KWOK to start the pod",
        lambda: cluster.client.get("pods", "train", "default")["status"].get("phase") == "Running",
    )
    ended = {"terminated": {"exitCode": 1, "reason": "Error"}}
    waiting = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s"}}
    status = {"name": "cuda", "ready": False, "restartCount": 2, "state": waiting}
    statuses = [{**status, "lastState": ended, "image": "cuda", "imageID": ""}]
    cluster.client.patch(
        "pods", "train", {"status": {"containerStatuses": statuses}},
        namespace="default", patch_type="strategic", status=True,
    )  # fmt: skip


def test_a_crash_looping_container_is_read_from_its_previous_run(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)], controllers=())
    crash_looping(cluster)
    cluster.keep_log("default", "train", "cuda", f"import torch\n{TOO_OLD}\n", previous=True)
    result = doctor(run_cli, cluster, "train")
    assert result.exit_code == 1
    [driver] = by_layer(result.json, "driver")
    assert driver["message"] == "the image's CUDA needs a newer NVIDIA driver than node gpu-a has"
    assert driver["evidence"] == [f"container cuda (previous run) log: {TOO_OLD}"]
    assert "nvidia-smi" in driver["fix"]


def test_logs_the_user_may_not_read_are_left_out_with_a_warning(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)], controllers=())
    crash_looping(cluster)
    cluster.keep_log("default", "train", "cuda", f"{TOO_OLD}\n", previous=True)
    cluster.deny("get", "pods/log")
    result = doctor(run_cli, cluster, "train")
    assert result.exception is None and result.exit_code == 0, result.stdout
    assert by_layer(result.json, "driver") == []
    assert "container logs left out of the diagnosis" in result.stderr
    assert 'cannot get resource "pods/log"' in result.stderr


def test_a_container_with_no_previous_run_is_skipped_quietly(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)], controllers=())
    crash_looping(cluster)  # no log kept: the node answers 400 for the previous run
    with pytest.raises(ApiError) as asked:
        cluster.store.request("GET", "/api/v1/namespaces/default/pods/train/log?previous=true")
    assert asked.value.code == 400
    result = doctor(run_cli, cluster, "train")
    assert result.exception is None and result.exit_code == 0, result.stderr
    assert "left out" not in result.stderr
