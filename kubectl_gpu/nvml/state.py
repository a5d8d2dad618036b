"""A node's MIG state and physical inventory as NVML reports them: every GPU with its MIG
mode and GPU/compute instances (`mig.state.MigState`), the MIG devices with their UUIDs, and
the inventory the node map reads. Must not change anything on a GPU (`nvml.steps` does)."""

from __future__ import annotations

import ctypes
from typing import Any

import pynvml

from kubectl_gpu.gpumap.allocations import MigDevice
from kubectl_gpu.gpumap.report import InventoryGpu, MigInstance, Placement
from kubectl_gpu.mig.state import ComputeInstance, GpuInstance, GpuState, MigState
from kubectl_gpu.nvml import codes, devices

_MIB = 1024 * 1024


def read_state() -> MigState:
    """Every GPU with its MIG mode and GPU/compute instances."""
    try:
        count = pynvml.nvmlDeviceGetCount()
    except pynvml.NVMLError as e:
        raise codes.error("cannot count the GPUs", e) from e
    return MigState(tuple(gpu_state(i) for i in range(count)))


def gpu_state(index: int) -> GpuState:
    """One GPU's identity, MIG mode and (with MIG on) its instances."""
    handle = devices.handle(index)
    where = f"GPU {index}"
    try:
        uuid = devices.text(pynvml.nvmlDeviceGetUUID(handle))
        name = devices.text(pynvml.nvmlDeviceGetName(handle))
        pci = pynvml.nvmlDeviceGetPciInfo_v3(handle).pciDeviceId
    except pynvml.NVMLError as e:
        raise codes.error(where, e) from e
    try:
        current, pending = pynvml.nvmlDeviceGetMigMode(handle)
    except pynvml.NVMLError_NotSupported:
        return GpuState(index, uuid, name, pci, mig_capable=False)
    except pynvml.NVMLError as e:
        raise codes.error(where, e) from e
    on = current == pynvml.NVML_DEVICE_MIG_ENABLE
    instances = _gpu_instances(index, handle) if on else ()
    return GpuState(
        index, uuid, name, pci, True, on, pending == pynvml.NVML_DEVICE_MIG_ENABLE, instances
    )


def _gpu_instances(index: int, handle: Any) -> tuple[GpuInstance, ...]:
    found = []
    for profile in devices.gi_profiles(index, handle).values():
        for gi in devices.instances_of(index, handle, profile):
            info = pynvml.nvmlGpuInstanceGetInfo(gi)
            cis = _compute_instances(index, gi)
            found.append(
                GpuInstance(info.id, profile.name, info.placement.start, info.placement.size, cis)
            )
    return tuple(sorted(found, key=lambda g: (g.placement_start, g.id)))


def _compute_instances(index: int, gi: Any) -> tuple[ComputeInstance, ...]:
    found = []
    for profile in devices.ci_profiles(gi).values():
        array = (pynvml.c_nvmlComputeInstance_t * max(1, profile.instance_count))()
        count = ctypes.c_uint()
        try:
            pynvml.nvmlGpuInstanceGetComputeInstances(gi, profile.id, array, ctypes.byref(count))
            ids = [pynvml.nvmlComputeInstanceGetInfo(array[i]).id for i in range(count.value)]
        except pynvml.NVMLError as e:
            raise codes.error(f"GPU {index}: listing compute instances", e) from e
        found += [ComputeInstance(ci, profile.name) for ci in ids]
    return tuple(sorted(found, key=lambda c: c.id))


def inventory() -> list[InventoryGpu]:
    """The physical GPUs with memory, MIG mode and MIG devices (UUID, profile, placement),
    as the node map reads them."""
    return [_inventory_gpu(gpu) for gpu in read_state().gpus]


def _inventory_gpu(gpu: GpuState) -> InventoryGpu:
    handle = devices.handle(gpu.index)
    minor = devices.optional(lambda: int(pynvml.nvmlDeviceGetMinorNumber(handle)))
    memory = devices.optional(lambda: int(pynvml.nvmlDeviceGetMemoryInfo(handle).total) // _MIB)
    mode = ("enabled" if gpu.mode_current else "disabled") if gpu.mig_capable else None
    placements = {g.id: Placement(g.placement_start, g.placement_size) for g in gpu.gpu_instances}
    found = tuple(
        MigInstance(
            d.uuid, d.profile, d.gi, d.ci, placements.get(d.gi) if d.gi is not None else None
        )
        for d in (mig_devices(gpu.index) if gpu.mode_current else ())
    )
    return InventoryGpu(gpu.index, gpu.uuid, gpu.model, minor, memory, mode, found)


def mig_devices(index: int, state: GpuState | None = None) -> tuple[MigDevice, ...]:
    """The MIG devices NVML enumerates on a GPU, with their UUIDs (`state`: the GPU's state
    already read, to name their profiles without reading it again)."""
    handle = devices.handle(index)
    state = state or gpu_state(index)
    names = {(g.id, c.id): c.profile for g in state.gpu_instances for c in g.compute_instances}
    found = []
    try:
        for j in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
            try:
                mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, j)
            except (pynvml.NVMLError_NotFound, pynvml.NVMLError_InvalidArgument):
                continue
            gi = pynvml.nvmlDeviceGetGpuInstanceId(mig)
            ci = pynvml.nvmlDeviceGetComputeInstanceId(mig)
            uuid = devices.text(pynvml.nvmlDeviceGetUUID(mig))
            found.append(MigDevice(uuid, names.get((gi, ci)), gi, ci))
    except pynvml.NVMLError as e:
        raise codes.error(f"GPU {index}: enumerating MIG devices", e) from e
    return tuple(found)
