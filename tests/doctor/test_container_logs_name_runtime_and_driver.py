"""Container log tails: which to read, and which CUDA/NVML/toolkit lines name which layer."""

from __future__ import annotations

from typing import Any

import pytest

from kubectl_gpu import doctor
from kubectl_gpu.doctor import containerlogs
from kubectl_gpu.doctor.containerlogs import ContainerLog, LogRead
from tests.doctor.builders import node, pod

RUNNING = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
BACKOFF = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}}


def status(state: dict[str, Any], restarts: int = 0, name: str = "cuda") -> dict[str, Any]:
    return {"name": name, "ready": False, "restartCount": restarts, "state": state}


@pytest.mark.parametrize(
    ("line", "layer", "message"),
    [
        (
            "RuntimeError: CUDA driver version is insufficient for CUDA runtime version",
            "driver",
            "the image's CUDA needs a newer NVIDIA driver than node gpu-a has",
        ),
        (
            "RuntimeError: No CUDA-capable device is detected",
            "runtime",
            "the container runs without a GPU: CUDA finds no device",
        ),
        (
            "Failed to initialize NVML: Driver/library version mismatch",
            "driver",
            "the NVIDIA driver on node gpu-a does not match its libraries",
        ),
        (
            "NVML: Driver/library version mismatch",
            "driver",
            "the NVIDIA driver on node gpu-a does not match its libraries",
        ),
        (
            "Failed to initialize NVML: Unknown Error",
            "driver",
            "NVML cannot reach the NVIDIA driver from the container on node gpu-a",
        ),
        (
            "nvidia-container-cli: initialization error: nvml error: driver not loaded",
            "runtime",
            "the NVIDIA container runtime on node gpu-a could not set up the container's GPU",
        ),
        (
            "OSError: libnvidia-ml.so.1: cannot open shared object file: No such file or directory",
            "runtime",
            "the container has no NVIDIA driver libraries: it was started without the GPU runtime",
        ),
    ],
)
def test_each_known_error_line_names_its_layer(line: str, layer: str, message: str) -> None:
    text = f"loading model\n{line}\nexiting\n"
    [found] = containerlogs.check(pod(node="gpu-a"), [ContainerLog("cuda", False, text)])
    assert (found.layer, found.severity, found.message) == (layer, "error", message)
    assert found.evidence == (f"container cuda log: {line}",)
    assert found.fix


def test_ordinary_logs_name_nothing() -> None:
    text = "epoch 1 loss 0.3\nusing device cuda:0 (NVIDIA H100 80GB HBM3)\n"
    assert containerlogs.check(pod(node="gpu-a"), [ContainerLog("cuda", False, text)]) == []


def test_a_repeated_error_is_one_verdict_with_the_latest_line() -> None:
    text = "".join(f"Failed to initialize NVML: Unknown Error (try {i})\n" for i in (1, 2))
    logs = [ContainerLog("cuda", False, text), ContainerLog("cuda", True, text)]
    [found] = containerlogs.check(pod(node="gpu-a"), logs)
    assert found.evidence == (
        "container cuda log: Failed to initialize NVML: Unknown Error (try 2)",
    )


def test_a_previous_run_is_named_as_such() -> None:
    logs = [ContainerLog("cuda", True, "no CUDA-capable device is detected\n")]
    [found] = containerlogs.check(pod(node="gpu-a"), logs)
    assert found.evidence == (
        "container cuda (previous run) log: no CUDA-capable device is detected",
    )


def test_logs_are_read_for_started_and_restarted_containers_only() -> None:
    assert containerlogs.wanted(pod(containerStatuses=[status(RUNNING)])) == ()  # no node yet
    running = pod(node="gpu-a", containerStatuses=[status(RUNNING)])
    assert containerlogs.wanted(running) == (LogRead("cuda", False),)
    looping = pod(node="gpu-a", containerStatuses=[status(BACKOFF, restarts=4)])
    assert containerlogs.wanted(looping) == (LogRead("cuda", True),)
    creating = pod(node="gpu-a", containerStatuses=[status({"waiting": {}})])
    assert containerlogs.wanted(creating) == ()


def test_reads_are_bounded_per_pod() -> None:
    many = [status(RUNNING, restarts=1, name=f"c{i}") for i in range(10)]
    reads = containerlogs.wanted(pod(node="gpu-a", containerStatuses=many))
    assert len(reads) == containerlogs.MAX_READS


def test_diagnose_pod_adds_log_verdicts_but_not_twice_what_a_status_said() -> None:
    line = "Failed to initialize NVML: Driver/library version mismatch"
    ended = {"terminated": {"exitCode": 1, "reason": "Error", "message": line}}
    subject = pod(node="gpu-a", phase="Running", containerStatuses=[status(ended)])
    case = doctor.PodCase(subject, (), (node("gpu-a", 1, used=1),))
    told = doctor.PodCase(subject, (), case.nodes, logs=[ContainerLog("cuda", False, line)])
    assert doctor.diagnose_pod(told) == doctor.diagnose_pod(case)
    quiet = pod(node="gpu-a", phase="Running", containerStatuses=[status(RUNNING)])
    logs = [ContainerLog("cuda", False, "RuntimeError: No CUDA-capable device is detected\n")]
    found = doctor.diagnose_pod(doctor.PodCase(quiet, (), case.nodes, logs=logs))
    assert [(d.layer, d.severity) for d in found] == [("runtime", "error")]
