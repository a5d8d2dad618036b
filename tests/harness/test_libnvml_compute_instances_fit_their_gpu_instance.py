"""Compute-instance profiles follow docs/upstream-facts.md M4.3: C ≤ G, and C < G only when 2C ≤ G+1
(7g: 1,2,3,4,7; 4g: 1,2,4; 3g: 1,2,3; 2g: 1,2; 1g: 1). Several compute instances in one GPU
instance are several MIG devices ("1c.3g.40gb"), up to the slices the GPU instance has."""

from __future__ import annotations

import ctypes

import pynvml
import pytest

from tests.kit.node.libnvml.fixture import MakeFakeNvml

SHARED = pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
CI_SLICES = {0: 1, 1: 2, 2: 3, 3: 4, 4: 7, 5: 8, 6: 6}  # NVML_COMPUTE_INSTANCE_PROFILE_* → C


@pytest.fixture
def gpu(fake_nvml: MakeFakeNvml) -> object:
    fake_nvml(gpus=["H100-SXM5-80GB"])
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    pynvml.nvmlDeviceSetMigMode(handle, pynvml.NVML_DEVICE_MIG_ENABLE)
    return handle


def _offered_slices(gi: object) -> list[int]:
    offered = []
    for enum, slices in CI_SLICES.items():
        try:
            pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, enum, SHARED)
        except pynvml.NVMLError_NotSupported:
            continue
        offered.append(slices)
    return sorted(offered)


@pytest.mark.parametrize(
    ("gi_profile_id", "expected"),
    [(0, [1, 2, 3, 4, 7]), (5, [1, 2, 4]), (9, [1, 2, 3]), (14, [1, 2]), (19, [1])],
    ids=["7g", "4g", "3g", "2g", "1g"],
)
def test_compute_profiles_offered_per_gpu_instance_size(
    gpu: object, gi_profile_id: int, expected: list[int]
) -> None:
    gi = pynvml.nvmlDeviceCreateGpuInstance(gpu, gi_profile_id)

    assert _offered_slices(gi) == expected


def test_three_1c_compute_instances_make_three_mig_devices(gpu: object) -> None:
    gi = pynvml.nvmlDeviceCreateGpuInstance(gpu, 9)
    one_c = pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, 0, SHARED)

    created = [pynvml.nvmlGpuInstanceCreateComputeInstance(gi, one_c.id) for _ in range(3)]

    assert one_c.name == "MIG 1c.3g.40gb" and one_c.instanceCount == 3
    assert [pynvml.nvmlComputeInstanceGetInfo(ci).placement.start for ci in created] == [0, 1, 2]
    migs = [pynvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, i) for i in range(3)]
    assert [pynvml.nvmlDeviceGetComputeInstanceId(m) for m in migs] == [0, 1, 2]
    assert len({pynvml.nvmlDeviceGetUUID(m) for m in migs}) == 3
    assert pynvml.nvmlDeviceGetName(migs[0]).endswith("MIG 1c.3g.40gb")


def test_a_full_gpu_instance_takes_no_more_compute_instances(gpu: object) -> None:
    gi = pynvml.nvmlDeviceCreateGpuInstance(gpu, 9)
    pynvml.nvmlGpuInstanceCreateComputeInstance(gi, 1)  # 2c

    assert pynvml.nvmlGpuInstanceGetComputeInstanceRemainingCapacity(gi, 0) == 1
    pynvml.nvmlGpuInstanceCreateComputeInstance(gi, 0)  # 1c in the last slice
    with pytest.raises(pynvml.NVMLError_InsufficientResources):
        pynvml.nvmlGpuInstanceCreateComputeInstance(gi, 0)


def test_an_unoffered_compute_profile_is_not_supported(gpu: object) -> None:
    gi = pynvml.nvmlDeviceCreateGpuInstance(gpu, 5)  # 4g

    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlGpuInstanceCreateComputeInstance(gi, 2)  # 3c does not fit a 4g


def test_compute_instance_placements_are_slice_offsets(gpu: object) -> None:
    gi = pynvml.nvmlDeviceCreateGpuInstance(gpu, 0)
    array = (pynvml.c_nvmlComputeInstancePlacement_t * 8)()
    count = ctypes.c_uint()

    pynvml.nvmlGpuInstanceGetComputeInstancePossiblePlacements(gi, 1, array, ctypes.byref(count))

    assert [(p.start, p.size) for p in array[: count.value]] == [(0, 2), (2, 2), (4, 2)]
    placement = pynvml.c_nvmlComputeInstancePlacement_t(start=4, size=2)
    ci = pynvml.nvmlGpuInstanceCreateComputeInstanceWithPlacement(gi, 1, ctypes.byref(placement))
    assert pynvml.nvmlComputeInstanceGetInfo(ci).placement.start == 4
