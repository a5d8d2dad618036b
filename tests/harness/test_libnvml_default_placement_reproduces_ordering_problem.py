"""GPU instances created without a placement land where the driver would put them, so the
"Insufficient Resources" ordering problem of docs/upstream-facts.md M2.2 item 6 and M5 item 9 shows:
1g, 1g, 2g first leave no room for a 3g (the MIG guide's example), while the same mix fits with
explicit placements or largest first. Largest first lands like mig-parted's all-balanced on a real
80GB board (DCGM#138: 3g at 4:4 as GI 2, 2g at 0:2 as GI 3, 1g at 2:1 and 3:1 as GI 9 and 10)."""

from __future__ import annotations

import ctypes

import pynvml
import pytest

from tests.kit.node.libnvml.fixture import MakeFakeNvml

# profile IDs on 7-slice boards (docs/upstream-facts.md M4.2)
ONE_G, TWO_G, THREE_G, FOUR_G = 19, 14, 9, 5


@pytest.fixture
def gpu(fake_nvml: MakeFakeNvml) -> object:
    fake_nvml(gpus=["H100-SXM5-80GB"])
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    pynvml.nvmlDeviceSetMigMode(handle, pynvml.NVML_DEVICE_MIG_ENABLE)
    return handle


def _create(gpu: object, profile_id: int) -> tuple[int, int, int]:
    info = pynvml.nvmlGpuInstanceGetInfo(pynvml.nvmlDeviceCreateGpuInstance(gpu, profile_id))
    return info.id, info.placement.start, info.placement.size


def _create_at(gpu: object, profile_id: int, start: int, size: int) -> None:
    placement = pynvml.c_nvmlGpuInstancePlacement_t(start=start, size=size)
    pynvml.nvmlDeviceCreateGpuInstanceWithPlacement(gpu, profile_id, ctypes.byref(placement))


def test_small_instances_first_leave_no_room_for_a_3g(gpu: object) -> None:
    for profile_id in (ONE_G, ONE_G, TWO_G):
        _create(gpu, profile_id)

    with pytest.raises(pynvml.NVMLError_InsufficientResources) as failure:
        _create(gpu, THREE_G)

    assert str(failure.value) == "Insufficient Resources"


def test_the_same_mix_fits_with_explicit_placements(gpu: object) -> None:
    for profile_id, start, size in ((ONE_G, 0, 1), (ONE_G, 1, 1), (TWO_G, 2, 2), (THREE_G, 4, 4)):
        _create_at(gpu, profile_id, start, size)

    assert pynvml.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, ONE_G) == 0
    assert pynvml.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, TWO_G) == 0


def test_largest_first_lands_like_mig_parted_on_a_real_board(gpu: object) -> None:
    layout = [_create(gpu, profile_id) for profile_id in (THREE_G, TWO_G, ONE_G, ONE_G)]

    assert layout == [(2, 4, 4), (3, 0, 2), (9, 2, 1), (10, 3, 1)]


def test_two_3g_without_placements_take_both_halves(gpu: object) -> None:
    layout = [_create(gpu, THREE_G) for _ in range(2)]

    assert layout == [(2, 4, 4), (1, 0, 4)]  # the guide: first 3g is GI 2, the second GI 1


@pytest.mark.parametrize("order", [(FOUR_G, THREE_G), (THREE_G, FOUR_G)])
def test_4g_and_3g_fit_in_either_order(gpu: object, order: tuple[int, int]) -> None:
    layout = sorted(_create(gpu, profile_id)[1:] for profile_id in order)

    assert layout == [(0, 4), (4, 4)]


def test_seven_1g_fill_slices_0_to_6(gpu: object) -> None:
    layout = sorted(_create(gpu, ONE_G) for _ in range(7))

    assert layout == [(7 + start, start, 1) for start in range(7)]
    with pytest.raises(pynvml.NVMLError_InsufficientResources):
        _create(gpu, ONE_G)
