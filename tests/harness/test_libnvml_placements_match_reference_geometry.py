"""GPU-instance profiles and their possible placements, read through pynvml, match the MIG
geometry of docs/upstream-facts.md M4 (the MIG guide's `-lgipp` table, not the go-nvml mocks) for
7-slice and 4-slice boards; overlapping or disallowed placements and instance caps are refused
with NVML's codes."""

from __future__ import annotations

import ctypes

import pynvml
import pytest

from tests.kit.node.libnvml.fixture import MakeFakeNvml
from tests.kit.node.libnvml.gpu_instances import DRIVER_PROFILE_ENUMS

P = pynvml
ONE_TO_SEVEN = [(start, 1) for start in range(7)]

# docs/upstream-facts.md M4.2: enum → (nvidia-smi profile ID, instance cap, placements start:size)
SEVEN_SLICE = {
    P.NVML_GPU_INSTANCE_PROFILE_1_SLICE: (19, 7, ONE_TO_SEVEN),
    P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1: (20, 1, ONE_TO_SEVEN),
    P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2: (15, 4, [(0, 2), (2, 2), (4, 2), (6, 2)]),
    P.NVML_GPU_INSTANCE_PROFILE_2_SLICE: (14, 3, [(0, 2), (2, 2), (4, 2)]),
    P.NVML_GPU_INSTANCE_PROFILE_3_SLICE: (9, 2, [(0, 4), (4, 4)]),
    P.NVML_GPU_INSTANCE_PROFILE_4_SLICE: (5, 1, [(0, 4)]),
    P.NVML_GPU_INSTANCE_PROFILE_7_SLICE: (0, 1, [(0, 8)]),
}
FOUR_SLICE = {
    P.NVML_GPU_INSTANCE_PROFILE_1_SLICE: (14, 4, [(0, 1), (1, 1), (2, 1), (3, 1)]),
    P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1: (21, 1, [(0, 1), (1, 1), (2, 1), (3, 1)]),
    P.NVML_GPU_INSTANCE_PROFILE_2_SLICE: (5, 2, [(0, 2), (2, 2)]),
    P.NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1: (6, 1, [(0, 2), (2, 2)]),
    P.NVML_GPU_INSTANCE_PROFILE_4_SLICE: (0, 1, [(0, 4)]),
}
# docs/upstream-facts.md M4.2 names, in the order of the tables above
NAMES = {
    "A100-SXM4-40GB": ["1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb",
                       "7g.40gb"],
    "A100-SXM4-80GB": ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb",
                       "7g.80gb"],
    "H100-SXM5-80GB": ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb",
                       "7g.80gb"],
    "H200-SXM-141GB": ["1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb",
                       "7g.141gb"],
    "A30": ["1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb"],
}  # fmt: skip
CASES = [
    (model, enum, name, *row)
    for model, names in NAMES.items()
    for (enum, row), name in zip(
        (FOUR_SLICE if model == "A30" else SEVEN_SLICE).items(), names, strict=True
    )
]


def _mig_gpu(fake_nvml: MakeFakeNvml, model: str) -> object:
    lib = fake_nvml(gpus=[model])
    pynvml.nvmlInit()
    gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
    if pynvml.nvmlDeviceSetMigMode(gpu, pynvml.NVML_DEVICE_MIG_ENABLE):
        lib.reset(0)  # Ampere: the mode activates with a GPU reset
    return gpu


def _placements(gpu: object, profile_id: int) -> list[tuple[int, int]]:
    count = ctypes.c_uint()
    pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(gpu, profile_id, None, ctypes.byref(count))
    array = (pynvml.c_nvmlGpuInstancePlacement_t * count.value)()
    pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(gpu, profile_id, array, ctypes.byref(count))
    return [(p.start, p.size) for p in array[: count.value]]


def _create_at(gpu: object, profile_id: int, start: int, size: int) -> object:
    placement = pynvml.c_nvmlGpuInstancePlacement_t(start=start, size=size)
    return pynvml.nvmlDeviceCreateGpuInstanceWithPlacement(gpu, profile_id, ctypes.byref(placement))


@pytest.mark.parametrize(("model", "enum", "name", "profile_id", "cap", "placements"), CASES)
def test_profile_and_placements_match_the_reference(
    fake_nvml: MakeFakeNvml,
    model: str,
    enum: int,
    name: str,
    profile_id: int,
    cap: int,
    placements: list[tuple[int, int]],
) -> None:
    gpu = _mig_gpu(fake_nvml, model)

    info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(gpu, enum)

    assert (info.id, info.name, info.instanceCount) == (profile_id, f"MIG {name}", cap)
    assert _placements(gpu, info.id) == placements


@pytest.mark.parametrize("model", list(NAMES))
def test_profiles_a_model_lacks_are_not_supported(fake_nvml: MakeFakeNvml, model: str) -> None:
    gpu = _mig_gpu(fake_nvml, model)
    known = FOUR_SLICE if model == "A30" else SEVEN_SLICE

    for enum in set(range(DRIVER_PROFILE_ENUMS)) - set(known):
        with pytest.raises(pynvml.NVMLError_NotSupported):
            pynvml.nvmlDeviceGetGpuInstanceProfileInfo(gpu, enum)
    # "enumerate until INVALID_ARGUMENT": the played driver (580) ends before pynvml's count
    for enum in range(DRIVER_PROFILE_ENUMS, pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT + 1):
        with pytest.raises(pynvml.NVMLError_InvalidArgument):
            pynvml.nvmlDeviceGetGpuInstanceProfileInfo(gpu, enum)


def test_placements_are_listed_even_with_mig_disabled(fake_nvml: MakeFakeNvml) -> None:
    fake_nvml(gpus=["A100-SXM4-40GB"])
    pynvml.nvmlInit()

    placements = _placements(pynvml.nvmlDeviceGetHandleByIndex(0), 9)

    assert placements == [(0, 4), (4, 4)]


def test_an_overlapping_placement_is_insufficient_resources(fake_nvml: MakeFakeNvml) -> None:
    gpu = _mig_gpu(fake_nvml, "H100-SXM5-80GB")
    _create_at(gpu, 14, 4, 2)  # 2g.20gb on slices 4-5

    with pytest.raises(pynvml.NVMLError_InsufficientResources):
        _create_at(gpu, 9, 4, 4)  # 3g.40gb on slices 4-7


@pytest.mark.parametrize(("start", "size"), [(2, 4), (4, 3), (8, 4)])
def test_a_placement_the_profile_does_not_allow_is_an_invalid_argument(
    fake_nvml: MakeFakeNvml, start: int, size: int
) -> None:
    gpu = _mig_gpu(fake_nvml, "H100-SXM5-80GB")

    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        _create_at(gpu, 9, start, size)


def test_the_instance_cap_ends_creation_and_remaining_capacity_counts_down(
    fake_nvml: MakeFakeNvml,
) -> None:
    gpu = _mig_gpu(fake_nvml, "A30")
    left = [pynvml.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, 14)]

    for _ in range(4):
        pynvml.nvmlDeviceCreateGpuInstance(gpu, 14)
        left.append(pynvml.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, 14))

    assert left == [4, 3, 2, 1, 0]
    with pytest.raises(pynvml.NVMLError_InsufficientResources):
        pynvml.nvmlDeviceCreateGpuInstance(gpu, 14)


def test_only_one_media_extension_instance_per_gpu(fake_nvml: MakeFakeNvml) -> None:
    gpu = _mig_gpu(fake_nvml, "A30")
    pynvml.nvmlDeviceCreateGpuInstance(gpu, 21)  # 1g.6gb+me

    assert pynvml.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, 6) == 0
    with pytest.raises(pynvml.NVMLError_InsufficientResources):
        pynvml.nvmlDeviceCreateGpuInstance(gpu, 6)  # 2g.12gb+me


def test_remaining_capacity_reflects_taken_slices(fake_nvml: MakeFakeNvml) -> None:
    gpu = _mig_gpu(fake_nvml, "H100-SXM5-80GB")
    _create_at(gpu, 19, 0, 1)  # 1g.10gb on slice 0

    ids = (19, 15, 14, 9, 5, 0)
    capacity = {pid: pynvml.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, pid) for pid in ids}

    assert capacity == {19: 6, 15: 3, 14: 2, 9: 1, 5: 0, 0: 0}
