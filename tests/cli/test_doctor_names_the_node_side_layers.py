"""Admission, kubelet and runtime: doctor explains a GPU pod the scheduler is not to blame for."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.cli.doctorpods import by_layer, gpu_pod, run_pods
from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.plane.plane import wait_for

Run = Callable[..., CliResult]
MISMATCH = "Failed to initialize NVML: Driver/library version mismatch"
BAD_FLAG = "version: v1\nflags:\n  plugin:\n    deviceIDStrategy: serial\n"


def doctor(run_cli: Run, cluster: SimCluster, *args: str) -> CliResult:
    return run_cli("--kubeconfig", str(cluster.kubeconfig), "doctor", *args, "-o", "json")


@pytest.fixture
def crashing_plugin(sim_cluster: MakeSimCluster) -> SimCluster:
    """The plugin on gpu-a exits 1 on a flag it rejects: CrashLoopBackOff, nothing advertised."""
    controllers = ("kubelet", "device-plugin")
    # NVIDIA's process takes a moment to start and fail: with the kubelet's back-off at full
    # length (10 s), the container is in CrashLoopBackOff while the test looks, as on a node
    cluster = sim_cluster(
        [NodeSpec("gpu-a", "L4", 1)], "helm", {"any": BAD_FLAG}, "any", controllers=controllers,
        time_scale=1.0,
    )  # fmt: skip
    assert cluster.allocatable("gpu-a") == 0
    return cluster


def test_a_crash_looping_plugin_is_named_for_a_pod_on_its_node(
    run_cli: Run, crashing_plugin: SimCluster
) -> None:
    pod = gpu_pod("train")
    pod["spec"]["nodeName"] = "gpu-a"  # bound already, as a pod placed before the crash is
    run_pods(crashing_plugin, pod)
    result = doctor(run_cli, crashing_plugin, "train")
    assert result.exit_code == 1
    kubelet = by_layer(result.json, "kubelet")
    refused = next(d for d in kubelet if "refused the pod at admission" in d["message"])
    assert refused["evidence"][0].startswith(
        "OutOfnvidia.com/gpu: Pod was rejected: Node didn't have enough"
    )
    plugin = next(d for d in kubelet if "device plugin on node gpu-a" in d["message"])
    assert "CrashLoopBackOff" in plugin["message"]
    assert plugin["object"].startswith("pod/nvdp-nvidia-device-plugin-")
    assert "kubectl logs -n nvidia-device-plugin" in plugin["fix"]
    assert "-c nvidia-device-plugin-ctr --previous" in plugin["fix"]


def test_a_pending_pod_behind_a_crashed_plugin_points_at_it(
    run_cli: Run, crashing_plugin: SimCluster
) -> None:
    run_pods(crashing_plugin, gpu_pod("train"))
    result = doctor(run_cli, crashing_plugin, "train").json
    assert by_layer(result, "scheduler") == []  # no node is "full": its plugin is down
    [plugin] = by_layer(result, "kubelet")
    assert plugin["object"] == "node/gpu-a"
    # validation's one wording of a rejected config: where (key, line, path), then what
    message = plugin["message"]
    assert message.startswith(
        "the device plugin on node gpu-a is CrashLoopBackOff: key any is not a valid config: "
    )
    assert ":any line " in message
    assert message.endswith(": invalid --device-id-strategy option: serial")
    assert plugin["fix"].startswith("correct key any of the plugin's ConfigMap")


def test_more_than_one_shared_gpu_is_refused_by_the_plugin(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    shared = (
        "version: v1\nsharing:\n  timeSlicing:\n    failRequestsGreaterThanOne: true\n"
        "    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"
    )
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)], "helm", {"any": shared}, "any")
    run_pods(cluster, gpu_pod("greedy", "2"))
    result = doctor(run_cli, cluster, "greedy")
    [refused] = by_layer(result.json, "kubelet")
    assert (
        refused["message"]
        == "kubelet on gpu-a refused the pod at admission (UnexpectedAdmissionError)"
    )
    assert "maximum request size for shared resources is 1; found 2" in refused["evidence"][0]
    assert refused["fix"].startswith("request 1 shared GPU per container")


def test_a_running_gpu_pod_gets_a_clean_bill(run_cli: Run, sim_cluster: MakeSimCluster) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)], "helm", {"any": "version: v1\n"}, "any")
    run_pods(cluster, gpu_pod("fine"))
    result = doctor(run_cli, cluster, "fine")
    assert result.exit_code == 0, result.stdout
    [info] = result.json["diagnoses"]
    assert info["severity"] == "info"
    assert (
        info["message"]
        == "no GPU problem found: the pod is Running on node gpu-a with 1 nvidia.com/gpu"
    )


def test_driver_errors_in_container_messages_name_the_driver(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    # No kubelet runs: once KWOK has started the pod, the container status below is what the
    # node reported last (written after KWOK's, which would otherwise replace it).
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)], controllers=())
    pod = gpu_pod("cuda")
    pod["spec"]["nodeName"] = "gpu-a"
    cluster.client.create(pod, keep_status=False)
    wait_for(
        "KWOK to start the pod",
        lambda: cluster.client.get("pods", "cuda", "default")["status"].get("phase") == "Running",
    )
    crashed = {"terminated": {"exitCode": 1, "reason": "Error", "message": MISMATCH}}
    status = {
        "name": "cuda",
        "ready": False,
        "restartCount": 3,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
        "lastState": crashed,
        "image": "cuda",
        "imageID": "",
    }
    cluster.client.patch(
        "pods", "cuda", {"status": {"containerStatuses": [status]}},
        namespace="default", patch_type="strategic", status=True,
    )  # fmt: skip
    result = doctor(run_cli, cluster, "cuda")
    assert result.exit_code == 1
    [driver] = by_layer(result.json, "driver")
    assert driver["evidence"] == [f"container cuda: {MISMATCH}"]
    assert "reboot" in driver["fix"]
