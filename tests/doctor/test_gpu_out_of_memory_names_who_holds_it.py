"""The CUDA out-of-memory verdict, from plain facts: which lines are an out-of-memory, and
what is said under each form of isolation (the real control plane test is
tests/cli/test_doctor_names_the_neighbour_holding_the_gpu_memory.py)."""

from __future__ import annotations

import pytest

from kubectl_gpu.doctor import neighbours
from kubectl_gpu.doctor.containerlogs import ContainerLog
from kubectl_gpu.doctor.neighbours import GpuShare, Holder, OutOfMemory
from tests.doctor.builders import pod

GIB = 2**30
ENDED = {"terminated": {"exitCode": 1, "reason": "Error"}}
BACKOFF = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}}


def share(isolation: str, others: tuple[Holder, ...] = (), cap: int | None = None) -> GpuShare:
    return GpuShare(0, "GPU-1", 80 * GIB, 79 * GIB, isolation, cap, 2 * GIB, others)


@pytest.mark.parametrize(
    "line",
    [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "RuntimeError: CUDA error: out of memory",
        "failed to alloc 4294967296 bytes on host: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
        "cudaMalloc failed: cudaErrorMemoryAllocation",
    ],
)
def test_cuda_out_of_memory_lines_are_found_in_logs(line: str) -> None:
    subject = pod(node="gpu-a")
    found = neighbours.evidence(subject, [ContainerLog("cuda", True, f"step 1\n{line}\nbye\n")])
    assert found == f"container cuda (previous run) log: {line}"


def test_the_termination_message_is_read_before_the_logs() -> None:
    line = "torch.OutOfMemoryError: CUDA out of memory."
    last = {**ENDED["terminated"], "message": f"Traceback\n{line}\n"}
    subject = pod(
        node="gpu-a",
        containerStatuses=[
            {"name": "cuda", "ready": False, "restartCount": 1, "state": BACKOFF,
             "lastState": {"terminated": last}}
        ],
    )  # fmt: skip
    assert neighbours.evidence(subject, []) == f"container cuda (last run) ended with: {line}"


@pytest.mark.parametrize("text", ["Killed", "OOMKilled", "MemoryError: out of memory", ""])
def test_host_memory_and_other_errors_are_not_a_gpu_out_of_memory(text: str) -> None:
    assert neighbours.evidence(pod(node="gpu-a"), [ContainerLog("cuda", False, text)]) is None


def test_under_mps_and_mig_the_pod_hit_its_own_cap() -> None:
    subject = pod(node="gpu-a")
    mps = neighbours.check(subject, OutOfMemory("e", (share("mps", cap=20 * GIB),)))
    mig = neighbours.check(subject, OutOfMemory("e", (share("mig", cap=10 * GIB),)))
    assert mps[0].message == (
        "the pod ran out of GPU memory within its MPS cap of 20.0Gi: no other pod took it"
    )
    assert mig[0].message.startswith("the pod ran out of GPU memory within its MIG instance's")


def test_time_sliced_names_the_biggest_holder_and_counts_the_rest() -> None:
    others = tuple(Holder(f"ml/p{i}", (10 - i) * GIB) for i in range(7))
    [found] = neighbours.check(pod(node="gpu-a"), OutOfMemory("e", (share("none", others),)))
    assert "ml/p0 holds 10.0Gi of its 80.0Gi" in found.message
    assert found.evidence[-1] == "and 2 more on GPU 0"
    assert "MPS" in found.fix and "MIG" in found.fix


def test_a_pod_that_gave_its_gpu_back_is_told_its_nodes_time_sliced_gpu() -> None:
    holders = (Holder("ml/hog", 70 * GIB),)
    oom = OutOfMemory("e", (share("none", holders),), held=False)
    [found] = neighbours.check(pod(node="gpu-a"), oom)
    assert found.message.startswith("the pod ran out of GPU memory on node gpu-a's time-sliced")
