"""A GPU instance created at an explicit placement on an H100 (3g.40gb at start 4), its compute
instance, and the MIG device they make, found the way the device plugin finds it: by index under
the parent, then its MIG- UUID, instance IDs and parent handle."""

from __future__ import annotations

import ctypes
import re

import pynvml
import pytest

from tests.kit.node.libnvml import FakeLibNvml
from tests.kit.node.libnvml.fixture import MakeFakeNvml

MIG_UUID = re.compile(r"^MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@pytest.fixture
def lib(fake_nvml: MakeFakeNvml) -> FakeLibNvml:
    return fake_nvml(gpus=["H100-SXM5-80GB"])


@pytest.fixture
def h100(lib: FakeLibNvml) -> object:
    pynvml.nvmlInit()
    gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
    pynvml.nvmlDeviceSetMigMode(gpu, pynvml.NVML_DEVICE_MIG_ENABLE)
    return gpu


def _create_3g_at_4(gpu: object) -> tuple[object, object]:
    info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(gpu, pynvml.NVML_GPU_INSTANCE_PROFILE_3_SLICE)
    placement = pynvml.c_nvmlGpuInstancePlacement_t(start=4, size=4)
    gi = pynvml.nvmlDeviceCreateGpuInstanceWithPlacement(gpu, info.id, ctypes.byref(placement))
    ci_info = pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(
        gi,
        pynvml.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE,
        pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
    )
    ci = pynvml.nvmlGpuInstanceCreateComputeInstance(gi, ci_info.id)
    return gi, ci


def _mig_devices(gpu: object) -> list[object]:
    found = []
    for index in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(gpu)):
        try:
            found.append(pynvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, index))
        except pynvml.NVMLError_NotFound:
            continue
    return found


def test_the_gpu_instance_sits_where_it_was_asked_to(h100: object) -> None:
    gi, _ = _create_3g_at_4(h100)

    info = pynvml.nvmlGpuInstanceGetInfo(gi)

    assert (info.profileId, info.placement.start, info.placement.size) == (9, 4, 4)
    assert info.id == 2  # the second half of the memory slices (nvidia-smi -lgi shows GI 2)
    assert pynvml.nvmlDeviceGetUUID(info.device) == pynvml.nvmlDeviceGetUUID(h100)


def test_the_compute_instance_reports_its_gpu_instance(h100: object) -> None:
    gi, ci = _create_3g_at_4(h100)

    info = pynvml.nvmlComputeInstanceGetInfo(ci)

    assert (info.id, info.profileId) == (0, pynvml.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE)
    assert (info.placement.start, info.placement.size) == (0, 3)
    assert (
        pynvml.nvmlGpuInstanceGetInfo(info.gpuInstance).id == pynvml.nvmlGpuInstanceGetInfo(gi).id
    )


def test_the_mig_device_is_enumerated_with_a_mig_uuid(h100: object) -> None:
    _create_3g_at_4(h100)

    devices = _mig_devices(h100)

    assert len(devices) == 1
    mig = devices[0]
    assert MIG_UUID.match(pynvml.nvmlDeviceGetUUID(mig))
    assert pynvml.nvmlDeviceIsMigDeviceHandle(mig).value == 1
    assert (pynvml.nvmlDeviceGetGpuInstanceId(mig), pynvml.nvmlDeviceGetComputeInstanceId(mig)) == (
        2,
        0,
    )
    assert pynvml.nvmlDeviceGetName(mig) == "NVIDIA H100 80GB HBM3 MIG 3g.40gb"


def test_indexes_past_the_existing_mig_devices_are_not_found(h100: object) -> None:
    _create_3g_at_4(h100)

    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlDeviceGetMigDeviceHandleByIndex(h100, 1)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        pynvml.nvmlDeviceGetMigDeviceHandleByIndex(h100, 7)


def test_the_parent_handle_resolves_to_the_physical_gpu(h100: object) -> None:
    _create_3g_at_4(h100)
    mig = _mig_devices(h100)[0]

    parent = pynvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig)

    assert pynvml.nvmlDeviceGetUUID(parent) == pynvml.nvmlDeviceGetUUID(h100)
    assert pynvml.nvmlDeviceIsMigDeviceHandle(parent).value == 0


def test_the_mig_uuid_finds_the_mig_device_again(h100: object) -> None:
    _create_3g_at_4(h100)
    uuid = pynvml.nvmlDeviceGetUUID(_mig_devices(h100)[0])

    again = pynvml.nvmlDeviceGetHandleByUUID(uuid)

    assert pynvml.nvmlDeviceGetGpuInstanceId(again) == 2


def test_the_mig_device_memory_is_its_profile_memory(h100: object) -> None:
    _create_3g_at_4(h100)

    memory = pynvml.nvmlDeviceGetMemoryInfo(_mig_devices(h100)[0])

    assert memory.total == 40448 * 1024 * 1024


def test_instances_are_found_by_id_and_by_profile(h100: object) -> None:
    _create_3g_at_4(h100)

    by_id = pynvml.nvmlDeviceGetGpuInstanceById(h100, 2)
    listed = (pynvml.c_nvmlGpuInstance_t * 2)()
    count = ctypes.c_uint()
    pynvml.nvmlDeviceGetGpuInstances(h100, 9, listed, ctypes.byref(count))

    assert pynvml.nvmlGpuInstanceGetInfo(by_id).placement.start == 4
    assert count.value == 1
    assert pynvml.nvmlGpuInstanceGetInfo(listed[0]).id == 2
    ci = pynvml.nvmlGpuInstanceGetComputeInstanceById(by_id, 0)
    assert pynvml.nvmlComputeInstanceGetInfo(ci).id == 0


def test_unknown_instance_ids_are_not_found(h100: object) -> None:
    gi, _ = _create_3g_at_4(h100)

    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlDeviceGetGpuInstanceById(h100, 1)
    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlGpuInstanceGetComputeInstanceById(gi, 5)


def test_a_process_in_the_mig_device_is_listed_there_and_on_the_parent(
    lib: FakeLibNvml, h100: object
) -> None:
    _create_3g_at_4(h100)
    lib.add_process(0, pid=31, used_mib=2048, mig_device=(2, 0))

    in_mig = pynvml.nvmlDeviceGetComputeRunningProcesses(_mig_devices(h100)[0])
    on_parent = pynvml.nvmlDeviceGetComputeRunningProcesses(h100)

    assert [(p.pid, p.gpuInstanceId, p.computeInstanceId) for p in in_mig] == [(31, 2, 0)]
    assert [p.pid for p in on_parent] == [31]
