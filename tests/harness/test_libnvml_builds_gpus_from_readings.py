"""A GPU can be built from a plain dict of readings (what a read-only pass over a real GPU
records), and ``snapshot()`` writes such a dict: JSON-serialisable, and read back it gives pynvml
the same answers."""

from __future__ import annotations

import ctypes
import json
from typing import Any

import pynvml

from tests.kit.node.libnvml import FakeLibNvml
from tests.kit.node.libnvml.fixture import MakeFakeNvml

READINGS: dict[str, Any] = {
    "name": "NVIDIA H100 80GB HBM3",
    "uuid": "GPU-2b5cd4a3-9e1f-4c27-8d1e-5a6b7c8d9e0f",
    "pci": {"bus_id": "00000000:1B:00.0", "device_id": "0x233010DE", "subsystem_id": 0x16C110DE},
    "memory": {"total": 85520809984, "reserved": 566231040},
    "cuda_compute_capability": [9, 0],
    "mig": {"current": 1, "pending": 1},
    "gi_profiles": [
        {"enum": 2, "id": 9, "name": "MIG 3g.40gb", "slice_count": 3, "instance_count": 2,
         "memory_size_mb": 40448, "multiprocessor_count": 60,
         "placements": [[0, 4], [4, 4]]},
        {"enum": 3, "id": 5, "name": "MIG 4g.40gb", "slice_count": 4, "instance_count": 1,
         "memory_size_mb": 40448, "multiprocessor_count": 64, "placements": [[0, 4]]},
        {"enum": 4, "id": 0, "name": "MIG 7g.80gb", "slice_count": 7, "instance_count": 1,
         "memory_size_mb": 81152, "multiprocessor_count": 132, "placements": [[0, 8]]},
    ],
}  # fmt: skip


def _answers(index: int) -> dict[str, Any]:
    """What pynvml reads from GPU ``index``: identity, MIG mode, profiles and placements."""
    gpu = pynvml.nvmlDeviceGetHandleByIndex(index)
    profiles = {}
    for enum in range(pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT):
        try:
            info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(gpu, enum)
        except (pynvml.NVMLError_NotSupported, pynvml.NVMLError_InvalidArgument):
            continue  # a profile this GPU lacks, or an enum newer than the driver
        array = (pynvml.c_nvmlGpuInstancePlacement_t * 8)()
        count = ctypes.c_uint()
        pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(gpu, info.id, array, ctypes.byref(count))
        placements = [(p.start, p.size) for p in array[: count.value]]
        profiles[info.name] = (info.id, info.instanceCount, info.memorySizeMB, placements)
    return {
        "name": pynvml.nvmlDeviceGetName(gpu),
        "uuid": pynvml.nvmlDeviceGetUUID(gpu),
        "bus_id": pynvml.nvmlDeviceGetPciInfo(gpu).busId,
        "memory": pynvml.nvmlDeviceGetMemoryInfo(gpu).total,
        "mig": pynvml.nvmlDeviceGetMigMode(gpu),
        "profiles": profiles,
    }


def test_a_gpu_built_from_readings_answers_with_them(fake_nvml: MakeFakeNvml) -> None:
    fake_nvml(gpus=[READINGS])
    pynvml.nvmlInit()

    answers = _answers(0)

    assert answers == {
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-2b5cd4a3-9e1f-4c27-8d1e-5a6b7c8d9e0f",
        "bus_id": "00000000:1B:00.0",
        "memory": 85520809984,
        "mig": [1, 1],
        "profiles": {
            "MIG 3g.40gb": (9, 2, 40448, [(0, 4), (4, 4)]),
            "MIG 4g.40gb": (5, 1, 40448, [(0, 4)]),
            "MIG 7g.80gb": (0, 1, 81152, [(0, 8)]),
        },
    }


def test_a_gpu_built_from_readings_creates_instances(fake_nvml: MakeFakeNvml) -> None:
    fake_nvml(gpus=[READINGS])
    pynvml.nvmlInit()
    gpu = pynvml.nvmlDeviceGetHandleByIndex(0)

    first = pynvml.nvmlGpuInstanceGetInfo(pynvml.nvmlDeviceCreateGpuInstance(gpu, 9))

    assert (first.id, first.placement.start) == (2, 4)
    assert pynvml.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, 0) == 0


def test_snapshot_is_json_and_reads_back_to_the_same_answers(fake_nvml: MakeFakeNvml) -> None:
    original = fake_nvml(gpus=["A100-SXM4-80GB", "A30", "L4"])
    for index in range(3):
        original.gpu(index).mig_current = original.gpu(index).mig_pending = 1
    original.gpu(2).mig_current = original.gpu(2).mig_pending = 0
    pynvml.nvmlInit()
    before = [_answers(i) for i in (0, 1)]
    snapshot = json.loads(json.dumps(original.snapshot()))

    fake_nvml(gpus=snapshot["gpus"])
    pynvml.nvmlInit()

    assert [_answers(i) for i in (0, 1)] == before
    assert pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(2)) == "NVIDIA L4"


def test_snapshot_shows_instances_and_processes(fake_nvml: MakeFakeNvml) -> None:
    lib: FakeLibNvml = fake_nvml(gpus=["H100-SXM5-80GB"])
    pynvml.nvmlInit()
    gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
    pynvml.nvmlDeviceSetMigMode(gpu, pynvml.NVML_DEVICE_MIG_ENABLE)
    gi = pynvml.nvmlDeviceCreateGpuInstanceWithPlacement(
        gpu, 15, ctypes.byref(pynvml.c_nvmlGpuInstancePlacement_t(start=2, size=2))
    )  # 1g.20gb
    pynvml.nvmlGpuInstanceCreateComputeInstance(gi, 0)
    lib.add_process(0, pid=5, used_mib=100, mig_device=(4, 0))

    state = lib.snapshot()["gpus"][0]

    assert [(g["id"], g["profile"], g["placement"]) for g in state["gpu_instances"]] == [
        (4, "1g.20gb", {"start": 2, "size": 2})
    ]
    assert state["gpu_instances"][0]["compute_instances"][0]["uuid"].startswith("MIG-")
    assert state["processes"] == [
        {
            "pid": 5,
            "used_memory": 100 * 1024 * 1024,
            "gpu_instance_id": 4,
            "compute_instance_id": 0,
            "sm_percent": None,  # no SM samples: nvmlDeviceGetProcessUtilization says NOT_FOUND
        }
    ]
