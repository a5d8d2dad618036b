"""doctor on a pod that died of CUDA out-of-memory on a time-sliced GPU names the neighbour
holding the memory, and that time-slicing isolates none.

On the real control plane: KWOK runs the pods and serves the crashed container's previous
log where the API server expects the node's kubelet; the node's agent is found by the real
API server, and its answer through the pod proxy comes from a proxy in front of it
(tests/cli/topcluster.py), as in `kubectl gpu top`'s tests: doctor reads it with top's reader.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubectl_gpu import keys
from kubectl_gpu.usage.readings import GpuReading
from tests.cli import topcluster as t
from tests.cli.doctorpods import by_layer, gpu_pod
from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.plane.plane import wait_for

pytestmark = pytest.mark.timeout(120)

Run = Callable[..., CliResult]
GIB = 2**30
GPU = "GPU-4c1d2e3f-1111-2222-3333-444444444444"
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
    "total capacity of 22.03 GiB of which 312.00 MiB is free."
)


@pytest.fixture
def crashed(sim_cluster: MakeSimCluster) -> SimCluster:
    """`train` on gpu-a (an L4 time-sliced 4 ways) crash-loops; its last run's log ends in
    CUDA's out-of-memory."""
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)], controllers=())
    cluster.client.patch(
        "nodes",
        "gpu-a",
        {"metadata": {"labels": {keys.GPU_SHARING_STRATEGY_LABEL: "time-slicing"}}},
    )
    pod: dict[str, Any] = gpu_pod("train")
    pod["spec"]["nodeName"] = "gpu-a"
    cluster.client.create(pod, keep_status=False)
    wait_for(
        "KWOK to start the pod",
        lambda: cluster.client.get("pods", "train", "default")["status"].get("phase") == "Running",
    )
    ended = {"terminated": {"exitCode": 1, "reason": "Error"}}
    waiting = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}}
    status = {"name": "cuda", "ready": False, "restartCount": 3, "state": waiting}
    statuses = [{**status, "lastState": ended, "image": "cuda", "imageID": ""}]
    cluster.client.patch(
        "pods", "train", {"status": {"containerStatuses": statuses}},
        namespace="default", patch_type="strategic", status=True,
    )  # fmt: skip
    cluster.keep_log("default", "train", "cuda", f"epoch 1\nloading batch\n{OOM}\n", previous=True)
    return cluster


@pytest.fixture
def proxy(crashed: SimCluster, tmp_path: Path) -> Iterator[tuple[t.PodProxyAnswers, Path]]:
    with t.answering_proxy(crashed, tmp_path) as answered:
        yield answered


def l4(used_gib: float) -> GpuReading:
    return GpuReading(0, GPU, "NVIDIA L4", int(22.5 * GIB), int(used_gib * GIB), 90, None, False)


def doctor(run_cli: Run, kubeconfig: Path) -> CliResult:
    return run_cli("--kubeconfig", str(kubeconfig), "doctor", "train", "-o", "json")


def test_the_neighbour_holding_most_of_the_memory_is_named(
    run_cli: Run, crashed: SimCluster, proxy: tuple[t.PodProxyAnswers, Path]
) -> None:
    answers, kubeconfig = proxy
    agent = t.agent_pod(crashed, "gpu-a")
    train = crashed.client.get("pods", "train", "default")
    hog = t.running_pod(crashed, "hog", "gpu-a")
    small = t.running_pod(crashed, "small", "gpu-a")
    answers.answers[(agent, "/v1/usage")] = t.Answer(
        body=t.usage_doc(
            "gpu-a",
            [l4(21.5)],
            [
                (GPU, t.process(21, 19.5, hog["metadata"]["uid"], sm=80)),
                (GPU, t.process(22, 1.5, small["metadata"]["uid"], sm=5)),
            ],
            [
                t.held(f"{GPU}::0", GPU, train, 0, 4),
                t.held(f"{GPU}::1", GPU, hog, 1, 4),
                t.held(f"{GPU}::2", GPU, small, 2, 4),
            ],
        )
    )

    result = doctor(run_cli, kubeconfig)

    assert result.exit_code == 1, result.stdout + result.stderr
    [oom] = [d for d in by_layer(result.json, "runtime") if "out of GPU memory" in d["message"]]
    assert oom["object"] == "pod/train"
    assert oom["message"] == (
        "the pod ran out of GPU memory on the time-sliced GPU it holds, which default/hog "
        "shares with no memory isolation: default/hog holds 19.5Gi of its 22.5Gi"
    )
    assert oom["evidence"] == [
        f"container cuda (previous run) log: {OOM}",
        f"node gpu-a GPU 0 ({GPU}): 21.5Gi of 22.5Gi in use now, 0Mi of it by this pod",
        "default/hog holds 19.5Gi on GPU 0",
        "default/small holds 1.5Gi on GPU 0",
    ]
    assert "time-slicing has no memory isolation" in oom["fix"]
    assert "kubectl gpu share --mps" in oom["fix"] and "MIG" in oom["fix"]
    assert [p for p in answers.asked if "/proxy/" in p] == [
        f"/api/v1/namespaces/{t.AGENT_NS}/pods/{agent}:9402/proxy/v1/usage"
    ]


def test_a_pod_alone_on_its_gpu_ran_out_of_its_own_memory(
    run_cli: Run, crashed: SimCluster, proxy: tuple[t.PodProxyAnswers, Path]
) -> None:
    answers, kubeconfig = proxy
    agent = t.agent_pod(crashed, "gpu-a")
    train = crashed.client.get("pods", "train", "default")
    answers.answers[(agent, "/v1/usage")] = t.Answer(
        body=t.usage_doc("gpu-a", [l4(0.4)], [], [t.held(GPU, GPU, train)])
    )

    result = doctor(run_cli, kubeconfig)

    assert result.exit_code == 1
    [oom] = [d for d in by_layer(result.json, "runtime") if "out of GPU memory" in d["message"]]
    assert oom["message"] == (
        "the pod ran out of GPU memory within its whole GPU's 22.5Gi: no other pod took it"
    )
    assert "batch size" in oom["fix"]


def test_without_an_agent_the_out_of_memory_is_still_named_and_why_no_figures(
    run_cli: Run, crashed: SimCluster
) -> None:
    result = doctor(run_cli, crashed.kubeconfig)

    assert result.exit_code == 1
    assert "Traceback" not in result.stderr
    [oom] = [d for d in by_layer(result.json, "runtime") if "out of GPU memory" in d["message"]]
    assert oom["evidence"][0] == f"container cuda (previous run) log: {OOM}"
    assert "neither the kubectl-gpu agent nor dcgm-exporter" in oom["evidence"][1]
    assert "kubectl gpu install" in oom["fix"]


def test_a_pod_that_never_ran_out_of_memory_asks_no_agent(
    run_cli: Run, crashed: SimCluster, proxy: tuple[t.PodProxyAnswers, Path]
) -> None:
    answers, kubeconfig = proxy
    t.agent_pod(crashed, "gpu-a")
    crashed.keep_log("default", "train", "cuda", "epoch 1\nKilled\n", previous=True)

    result = doctor(run_cli, kubeconfig)

    assert not [d for d in result.json["diagnoses"] if "out of GPU memory" in d["message"]]
    assert answers.asked == []
    json.dumps(result.json)
