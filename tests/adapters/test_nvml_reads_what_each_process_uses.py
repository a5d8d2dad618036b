"""`nvml.Session.usage` against the NVML stand-in (pynvml unchanged above it): each process's
memory and SM %, why a figure is missing (no samples, MIG), the GPU's and each MIG device's
own totals, and MIG processes found in their instance."""

from __future__ import annotations

import ctypes

import pynvml

from kubectl_gpu import nvml
from kubectl_gpu.usage import readings
from tests.kit.node.libnvml.fixture import MakeFakeNvml

MIB = 2**20


def test_each_process_has_its_own_memory_and_sm(fake_nvml: MakeFakeNvml) -> None:
    lib = fake_nvml(gpus=["H100-SXM5-80GB", "L4"])
    lib.add_process(0, 100, used_mib=2048, sm_percent=30)
    lib.add_process(0, 101, used_mib=1024)
    lib.add_process(1, 200, used_mib=512, sm_percent=5)

    with nvml.session() as device:
        h100, l4 = device.usage(0)

    assert h100.memory_total == lib.gpu(0).memory_total and h100.memory_used == 3072 * MIB
    assert h100.sm_percent == 30 and not h100.mig_enabled
    by_pid = {p.pid: p for p in h100.processes}
    assert (by_pid[100].used_memory, by_pid[100].sm_percent) == (2048 * MIB, 30)
    assert by_pid[101].sm_percent is None
    assert by_pid[101].sm_unavailable == readings.SM_NO_SAMPLES
    assert [(p.pid, p.sm_percent) for p in l4.processes] == [(200, 5)]


def test_with_no_sample_at_all_every_process_says_so(fake_nvml: MakeFakeNvml) -> None:
    lib = fake_nvml(gpus=["L4"])
    lib.add_process(0, 7, used_mib=64)

    with nvml.session() as device:
        [gpu] = device.usage(0)

    assert [(p.sm_percent, p.sm_unavailable) for p in gpu.processes] == [
        (None, readings.SM_NO_SAMPLES)
    ]


def test_on_a_mig_gpu_memory_is_per_instance_and_sm_is_not_offered(fake_nvml: MakeFakeNvml) -> None:
    lib = fake_nvml(gpus=["H100-SXM5-80GB"])
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    pynvml.nvmlDeviceSetMigMode(handle, pynvml.NVML_DEVICE_MIG_ENABLE)
    gi = pynvml.nvmlDeviceCreateGpuInstanceWithPlacement(
        handle, 15, ctypes.byref(pynvml.c_nvmlGpuInstancePlacement_t(start=2, size=2))
    )  # 1g.20gb
    pynvml.nvmlGpuInstanceCreateComputeInstance(gi, 0)
    pynvml.nvmlShutdown()
    lib.add_process(0, 5, used_mib=100, mig_device=(4, 0), sm_percent=50)

    with nvml.session() as device:
        [gpu] = device.usage(0)

    assert gpu.mig_enabled and gpu.sm_percent is None and gpu.sm_unavailable == readings.SM_MIG
    [mig] = gpu.mig_devices
    assert (mig.profile, mig.gpu_instance, mig.compute_instance) == ("1g.20gb", 4, 0)
    assert (mig.placement_start, mig.placement_size) == (2, 2)  # where `top --tree` draws it
    assert mig.memory_used == 100 * MIB and mig.memory_total is not None
    [process] = gpu.processes
    assert (process.pid, process.gpu_instance, process.compute_instance) == (5, 4, 0)
    assert process.sm_percent is None and process.sm_unavailable == readings.SM_MIG
