"""The stand-in and the C library answer with the return codes of the real library, which pynvml
turns into its own exception classes: UNINITIALIZED before nvmlInit and after the last
nvmlShutdown, FUNCTION_NOT_FOUND for symbols the stand-in lacks (the C library has every symbol
nvml.h declares and answers NOT_SUPPORTED for those it does not implement), NO_PERMISSION for a
non-root caller's changes, and NOT_SUPPORTED for MIG calls a GPU or its current mode cannot
serve."""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import pynvml
import pytest

from tests.kit.node.libnvml import FakeLibNvml
from tests.kit.node.libnvml.clib import CLibNvml
from tests.kit.node.libnvml.fixture import MakeFakeNvml


@pytest.fixture
def lib(fake_nvml: MakeFakeNvml) -> FakeLibNvml:
    return fake_nvml(gpus=["H100-SXM5-80GB", "L4"])


def _mig_h100() -> object:
    gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
    pynvml.nvmlDeviceSetMigMode(gpu, pynvml.NVML_DEVICE_MIG_ENABLE)
    return gpu


def test_calls_before_nvml_init_are_uninitialized(lib: FakeLibNvml) -> None:
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlDeviceGetCount()


def test_calls_after_the_last_shutdown_are_uninitialized(lib: FakeLibNvml) -> None:
    pynvml.nvmlInit()
    pynvml.nvmlInit()
    pynvml.nvmlShutdown()
    assert pynvml.nvmlDeviceGetCount() == 2  # still one init outstanding

    pynvml.nvmlShutdown()

    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlDeviceGetCount()


def test_a_function_neither_implements_is_not_found_or_not_supported(lib: FakeLibNvml) -> None:
    pynvml.nvmlInit()
    # A Go binary calls NVML functions directly: a missing symbol would crash it, so the C
    # library defines them all; the stand-in lacks the symbol, as an older driver would.
    expected = pynvml.NVMLError_NotSupported
    if not isinstance(lib, CLibNvml):
        expected = pynvml.NVMLError_FunctionNotFound

    with pytest.raises(expected):
        pynvml.nvmlDeviceGetPowerUsage(pynvml.nvmlDeviceGetHandleByIndex(0))


def test_a_non_root_caller_cannot_change_mig_mode(lib: FakeLibNvml) -> None:
    pynvml.nvmlInit()
    lib.privileged = False

    with pytest.raises(pynvml.NVMLError_NoPermission):
        pynvml.nvmlDeviceSetMigMode(
            pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_DEVICE_MIG_ENABLE
        )


def test_a_non_root_caller_cannot_create_or_destroy_instances(lib: FakeLibNvml) -> None:
    pynvml.nvmlInit()
    gpu = _mig_h100()
    gi = pynvml.nvmlDeviceCreateGpuInstance(gpu, 9)
    ci = pynvml.nvmlGpuInstanceCreateComputeInstance(gi, 2)
    lib.privileged = False

    with pytest.raises(pynvml.NVMLError_NoPermission):
        pynvml.nvmlDeviceCreateGpuInstance(gpu, 9)
    with pytest.raises(pynvml.NVMLError_NoPermission):
        pynvml.nvmlGpuInstanceCreateComputeInstance(gi, 0)
    with pytest.raises(pynvml.NVMLError_NoPermission):
        pynvml.nvmlComputeInstanceDestroy(ci)
    with pytest.raises(pynvml.NVMLError_NoPermission):
        pynvml.nvmlGpuInstanceDestroy(gi)


def test_a_non_root_caller_can_still_read_mig_devices(lib: FakeLibNvml) -> None:
    pynvml.nvmlInit()
    gpu = _mig_h100()
    pynvml.nvmlGpuInstanceCreateComputeInstance(pynvml.nvmlDeviceCreateGpuInstance(gpu, 0), 4)
    lib.privileged = False

    mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0)

    assert pynvml.nvmlDeviceGetUUID(mig).startswith("MIG-")


@pytest.mark.parametrize(
    "call",
    [
        lambda gpu: pynvml.nvmlDeviceGetGpuInstanceProfileInfo(gpu, 0),
        lambda gpu: pynvml.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, 19),
        lambda gpu: pynvml.nvmlDeviceCreateGpuInstance(gpu, 19),
        lambda gpu: pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(
            gpu, 19, None, ctypes.byref(ctypes.c_uint())
        ),
    ],
    ids=["profile-info", "remaining-capacity", "create", "placements"],
)
def test_mig_calls_on_a_gpu_without_mig_are_not_supported(
    lib: FakeLibNvml, call: Callable[[object], object]
) -> None:
    pynvml.nvmlInit()

    with pytest.raises(pynvml.NVMLError_NotSupported):
        call(pynvml.nvmlDeviceGetHandleByIndex(1))


def test_profiles_read_with_mig_mode_off_but_instances_need_it_on(lib: FakeLibNvml) -> None:
    """As a real H200 on driver 580 answered (tests/data/nvml): profiles and their capacity are
    readable before MIG mode is enabled; creating a GPU instance is not."""
    pynvml.nvmlInit()
    gpu = pynvml.nvmlDeviceGetHandleByIndex(0)

    info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(gpu, pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE)
    assert (info.id, info.instanceCount) == (19, 7)
    assert pynvml.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, 19) == 7
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceCreateGpuInstance(gpu, 19)


def test_a_stale_or_foreign_handle_is_an_invalid_argument(lib: FakeLibNvml) -> None:
    pynvml.nvmlInit()

    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        pynvml.nvmlDeviceGetUUID(pynvml.c_nvmlDevice_t())


def test_the_v1_profile_info_struct_is_served_too(lib: FakeLibNvml) -> None:
    pynvml.nvmlInit()

    info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(
        _mig_h100(), pynvml.NVML_GPU_INSTANCE_PROFILE_7_SLICE, version=1
    )

    assert (info.id, info.sliceCount, info.memorySizeMB) == (0, 7, 81152)
