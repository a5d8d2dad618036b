"""Destroying MIG instances fails with IN_USE while a process runs in the MIG device or a GPU
instance still holds compute instances (nvml.h); once idle, compute instance then GPU instance go,
their handles stop working and the MIG device disappears from enumeration."""

from __future__ import annotations

import pynvml
import pytest

from tests.kit.node.libnvml import FakeLibNvml
from tests.kit.node.libnvml.fixture import MakeFakeNvml

TWO_G = 14


@pytest.fixture
def lib(fake_nvml: MakeFakeNvml) -> FakeLibNvml:
    return fake_nvml(gpus=["H200-SXM-141GB"])


@pytest.fixture
def instances(lib: FakeLibNvml) -> tuple[object, object, object]:
    """(GPU, GPU instance, compute instance) of one 2g.35gb MIG device."""
    pynvml.nvmlInit()
    gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
    pynvml.nvmlDeviceSetMigMode(gpu, pynvml.NVML_DEVICE_MIG_ENABLE)
    gi = pynvml.nvmlDeviceCreateGpuInstance(gpu, TWO_G)
    ci = pynvml.nvmlGpuInstanceCreateComputeInstance(
        gi, pynvml.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE
    )
    return gpu, gi, ci


def _mig_device_ids(gi: object, ci: object) -> tuple[int, int]:
    return pynvml.nvmlGpuInstanceGetInfo(gi).id, pynvml.nvmlComputeInstanceGetInfo(ci).id


def test_a_gpu_instance_with_a_busy_mig_device_is_in_use(
    lib: FakeLibNvml, instances: tuple[object, object, object]
) -> None:
    _, gi, ci = instances
    lib.add_process(0, pid=99, mig_device=_mig_device_ids(gi, ci))

    with pytest.raises(pynvml.NVMLError_InUse) as failure:
        pynvml.nvmlGpuInstanceDestroy(gi)

    assert str(failure.value) == "In use by another client"


def test_a_busy_compute_instance_is_in_use(
    lib: FakeLibNvml, instances: tuple[object, object, object]
) -> None:
    _, gi, ci = instances
    lib.add_process(0, pid=99, mig_device=_mig_device_ids(gi, ci))

    with pytest.raises(pynvml.NVMLError_InUse):
        pynvml.nvmlComputeInstanceDestroy(ci)


def test_a_gpu_instance_holding_compute_instances_is_in_use(
    instances: tuple[object, object, object],
) -> None:
    _, gi, _ = instances

    with pytest.raises(pynvml.NVMLError_InUse):
        pynvml.nvmlGpuInstanceDestroy(gi)


def test_once_the_process_ends_both_instances_can_be_destroyed(
    lib: FakeLibNvml, instances: tuple[object, object, object]
) -> None:
    gpu, gi, ci = instances
    lib.add_process(0, pid=99, mig_device=_mig_device_ids(gi, ci))
    lib.stop_process(0, 99)

    pynvml.nvmlComputeInstanceDestroy(ci)
    pynvml.nvmlGpuInstanceDestroy(gi)

    assert pynvml.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, TWO_G) == 3
    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0)


def test_handles_of_destroyed_instances_are_invalid(
    instances: tuple[object, object, object],
) -> None:
    gpu, gi, ci = instances
    mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0)

    pynvml.nvmlComputeInstanceDestroy(ci)
    pynvml.nvmlGpuInstanceDestroy(gi)

    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        pynvml.nvmlGpuInstanceGetInfo(gi)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        pynvml.nvmlDeviceGetUUID(mig)


def test_a_reset_destroys_all_instances(
    lib: FakeLibNvml, instances: tuple[object, object, object]
) -> None:
    gpu, _, _ = instances

    assert lib.reset(0) == pynvml.NVML_SUCCESS

    assert pynvml.nvmlDeviceGetMigMode(gpu) == [0, 0]  # Hopper forgets MIG mode on reset
    assert lib.snapshot()["gpus"][0]["gpu_instances"] == []
