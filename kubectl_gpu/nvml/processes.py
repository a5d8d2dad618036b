"""What each process uses of a node's GPUs, as NVML reports it (for `kubectl gpu top`): every
GPU's memory and utilisation, its MIG devices' memory, and its compute processes with their
memory and SM %, as the plain readings of `usage.readings`. Must not judge the figures
(`usage` does) nor change anything on a GPU."""

from __future__ import annotations

import dataclasses
from typing import Any

import pynvml

from kubectl_gpu.nvml import codes, devices, state
from kubectl_gpu.usage import readings
from kubectl_gpu.usage.readings import GpuReading, MigReading, ProcessReading

_NOT_AVAILABLE = 0xFFFFFFFF  # nvmlProcessInfo_t: no GPU/compute instance (MIG off)


def usage(since_us: int) -> tuple[GpuReading, ...]:
    """Every GPU's memory and utilisation, its MIG devices' memory, and its compute
    processes with their memory and SM %, averaged over NVML's samples newer than
    `since_us` (µs since the epoch). A figure NVML does not give is None with its
    reason (`readings.SM_*`); an NVML error on one GPU is raised as a DeviceError."""
    try:
        count = pynvml.nvmlDeviceGetCount()
    except pynvml.NVMLError as e:
        raise codes.error("cannot count the GPUs", e) from e
    return tuple(_gpu_usage(i, since_us) for i in range(count))


def running_processes(index: int) -> tuple[int, ...]:
    """PIDs of the compute processes on a GPU (any of its MIG devices included)."""
    try:
        found = pynvml.nvmlDeviceGetComputeRunningProcesses(devices.handle(index))
    except pynvml.NVMLError as e:
        raise codes.error(f"GPU {index}: listing processes", e) from e
    return tuple(int(p.pid) for p in found)


def _gpu_usage(index: int, since_us: int) -> GpuReading:
    handle = devices.handle(index)
    where = f"GPU {index}"
    try:
        uuid = devices.text(pynvml.nvmlDeviceGetUUID(handle))
        model = devices.text(pynvml.nvmlDeviceGetName(handle))
    except pynvml.NVMLError as e:
        raise codes.error(where, e) from e
    mig_on = devices.mig_enabled(handle)
    total, used = devices.memory(handle)
    sm, sm_why = _device_sm(handle, mig_on)
    migs = _mig_usage(index) if mig_on else ()
    found = _processes(index, handle, migs)
    if mig_on:
        found = [dataclasses.replace(p, sm_unavailable=readings.SM_MIG) for p in found]
    else:
        found = _with_sm(handle, found, since_us)
    return GpuReading(index, uuid, model, total, used, sm, sm_why, mig_on, migs, tuple(found))


def _device_sm(handle: Any, mig_on: bool) -> tuple[int | None, str | None]:
    if mig_on:  # NVML: utilisation is not supported on MIG-enabled GPUs
        return None, readings.SM_MIG
    try:
        return int(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu), None
    except pynvml.NVMLError_NotSupported:
        return None, readings.SM_NOT_SUPPORTED
    except pynvml.NVMLError:
        return None, readings.SM_NOT_READ


def _mig_usage(index: int) -> tuple[MigReading, ...]:
    handle = devices.handle(index)
    gpu = state.gpu_state(index)
    placements = {g.id: (g.placement_start, g.placement_size) for g in gpu.gpu_instances}
    found = []
    for device in state.mig_devices(index, gpu):
        mig = devices.mig_handle(handle, device.gi, device.ci)
        total, used = devices.memory(mig) if mig is not None else (None, None)
        start, size = placements.get(-1 if device.gi is None else device.gi, (None, None))
        found.append(MigReading(device.uuid, device.profile, device.gi, device.ci, total, used,
                                start, size))  # fmt: skip
    return tuple(found)


def _processes(index: int, handle: Any, migs: tuple[MigReading, ...]) -> list[ProcessReading]:
    """The GPU's compute processes; on a MIG GPU asked of each MIG device too (drivers
    list a MIG device's processes on its own handle), without repeats."""
    found: dict[tuple[int, int | None, int | None], ProcessReading] = {}
    for p in _running(index, handle, None):
        found[(p.pid, p.gpu_instance, p.compute_instance)] = p
    for m in migs:
        mig = devices.mig_handle(handle, m.gpu_instance, m.compute_instance)
        if mig is None:
            continue
        for p in _running(index, mig, m):
            found.setdefault((p.pid, p.gpu_instance, p.compute_instance), p)
    return list(found.values())


def _instance(value: Any) -> int | None:
    return None if value is None or int(value) == _NOT_AVAILABLE else int(value)


def _running(index: int, handle: Any, mig: MigReading | None) -> list[ProcessReading]:
    try:
        listed = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
    except pynvml.NVMLError_NotSupported:
        return []
    except pynvml.NVMLError as e:
        raise codes.error(f"GPU {index}: listing processes", e) from e
    found = []
    for p in listed:
        gi = _instance(getattr(p, "gpuInstanceId", None))
        ci = _instance(getattr(p, "computeInstanceId", None))
        if mig is not None and gi is None:
            gi, ci = mig.gpu_instance, mig.compute_instance
        memory = p.usedGpuMemory if isinstance(p.usedGpuMemory, int) else None
        found.append(ProcessReading(int(p.pid), memory, gi, ci))
    return found


def _with_sm(handle: Any, found: list[ProcessReading], since_us: int) -> list[ProcessReading]:
    """Each process's SM %, the mean of its samples newer than `since_us`."""
    if not found:
        return found
    why: str | None = None
    samples: dict[int, list[int]] = {}
    try:
        for sample in pynvml.nvmlDeviceGetProcessUtilization(handle, since_us):
            samples.setdefault(int(sample.pid), []).append(int(sample.smUtil))
    except pynvml.NVMLError_NotFound:
        why = readings.SM_NO_SAMPLES
    except pynvml.NVMLError_NotSupported:
        why = readings.SM_NOT_SUPPORTED
    except pynvml.NVMLError as e:
        # pynvml raises NVMLError(NVML_SUCCESS) when the first call finds no sample
        why = readings.SM_NO_SAMPLES if e.value == pynvml.NVML_SUCCESS else readings.SM_NOT_READ
    return [
        dataclasses.replace(p, sm_percent=round(sum(s) / len(s)))
        if (s := samples.get(p.pid))
        else dataclasses.replace(p, sm_unavailable=why or readings.SM_NO_SAMPLES)
        for p in found
    ]
