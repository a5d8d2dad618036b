"""NVML C symbols for init, the system and device inventory, in the stand-in (test code only).

Owns: nvmlInitWithFlags/nvmlInit_v2/nvmlShutdown, nvmlErrorString, driver and NVML versions,
device count and handles (by index, UUID, PCI bus ID), UUID, name, index, minor number, PCI info,
memory, compute capability, running compute processes, and MIG mode get/set. Each method is named
after the C symbol pynvml 13.615 looks up and takes the ctypes arguments its wrapper passes.
Must not: hold GPU rules (device.py) or MIG instance symbols (gpu_instances.py,
compute_instances.py).
"""

from __future__ import annotations

from typing import Any

import pynvml

from tests.kit.node.libnvml import codes, marshal
from tests.kit.node.libnvml.base import (
    SymbolCore,
    c_symbol,
    c_symbol_any_time,
    status,
)
from tests.kit.node.libnvml.device import MIB, NOT_AVAILABLE, Gpu
from tests.kit.node.libnvml.marshal import HandleTarget
from tests.kit.node.libnvml.models import mig_device_profile

# nvmlErrorString's texts for the codes pynvml has no string of its own for.
_ERROR_STRINGS = {
    codes.IN_USE: b"In use by another client",
    codes.INSUFFICIENT_RESOURCES: b"Insufficient Resources",
    codes.ARGUMENT_VERSION_MISMATCH: b"Argument version mismatch",
    codes.INVALID_STATE: b"Invalid state",
    codes.NO_DATA: b"No data",
}


class InventorySymbols(SymbolCore):
    """Init, system and per-device read-only symbols, plus MIG mode."""

    driver_version = "580.159.04"  # the driver read in tests/data/nvml
    nvml_version = "13.580.159.04"
    cuda_driver_version = 13000

    # -- init and system -----------------------------------------------------------------------

    @c_symbol_any_time
    def nvmlInitWithFlags(self, flags: Any) -> int:
        self.init_count += 1
        return codes.SUCCESS

    @c_symbol_any_time
    def nvmlInit_v2(self) -> int:
        self.init_count += 1
        return codes.SUCCESS

    @c_symbol_any_time
    def nvmlShutdown(self) -> int:
        if self.init_count == 0:
            return codes.UNINITIALIZED
        self.init_count -= 1
        return codes.SUCCESS

    @c_symbol_any_time
    def nvmlErrorString(self, result: Any) -> bytes:
        return _ERROR_STRINGS.get(marshal.uint(result), b"Unknown Error")

    @c_symbol
    def nvmlSystemGetDriverVersion(self, buffer: Any, size: Any) -> int:
        return marshal.write_text(buffer, size, self.driver_version)

    @c_symbol
    def nvmlSystemGetNVMLVersion(self, buffer: Any, size: Any) -> int:
        return marshal.write_text(buffer, size, self.nvml_version)

    @c_symbol
    def nvmlSystemGetCudaDriverVersion(self, version: Any) -> int:
        return status(marshal.write_value(version, self.cuda_driver_version))

    @c_symbol
    def nvmlSystemGetCudaDriverVersion_v2(self, version: Any) -> int:
        return self.nvmlSystemGetCudaDriverVersion(version)

    # -- device handles ------------------------------------------------------------------------

    @c_symbol
    def nvmlDeviceGetCount_v2(self, count: Any) -> int:
        return status(marshal.write_value(count, len(self.gpus)))

    @c_symbol
    def nvmlDeviceGetHandleByIndex_v2(self, index: Any, device: Any) -> int:
        position = marshal.uint(index)
        if position >= len(self.gpus):
            return codes.INVALID_ARGUMENT
        return self._write_handle(device, self.gpu_target(self.gpus[position]))

    @c_symbol
    def nvmlDeviceGetHandleByUUID(self, uuid: Any, device: Any) -> int:
        wanted = marshal.read_text(uuid)
        for gpu in self.gpus:
            if gpu.uuid == wanted:
                return self._write_handle(device, self.gpu_target(gpu))
            for gi, ci in gpu.mig.mig_devices():
                if ci.uuid == wanted:
                    return self._write_handle(device, self.mig_target(gpu, gi, ci))
        return codes.NOT_FOUND

    @c_symbol
    def nvmlDeviceGetHandleByPciBusId_v2(self, bus_id: Any, device: Any) -> int:
        wanted = _normalise_bus_id(marshal.read_text(bus_id))
        for gpu in self.gpus:
            if _normalise_bus_id(gpu.pci_bus_id) == wanted:
                return self._write_handle(device, self.gpu_target(gpu))
        return codes.NOT_FOUND

    def _write_handle(self, ref: Any, handle_target: HandleTarget) -> int:
        return status(self.handles.write(ref, handle_target))

    # -- what a device reports -----------------------------------------------------------------

    @c_symbol
    def nvmlDeviceGetUUID(self, device: Any, buffer: Any, size: Any) -> int:
        found = self.resolve(device, "gpu", "mig")
        if found is None:
            return codes.INVALID_ARGUMENT
        uuid = found.ci.uuid if found.ci is not None else found.gpu.uuid
        return marshal.write_text(buffer, size, uuid)

    @c_symbol
    def nvmlDeviceGetName(self, device: Any, buffer: Any, size: Any) -> int:
        found = self.resolve(device, "gpu", "mig")
        if found is None:
            return codes.INVALID_ARGUMENT
        name = found.gpu.name
        if found.gi is not None and found.ci is not None:
            profile = mig_device_profile(found.gi.profile, found.ci.profile.slice_count)
            name = f"{name} MIG {profile}"
        return marshal.write_text(buffer, size, name)

    @c_symbol
    def nvmlDeviceGetIndex(self, device: Any, index: Any) -> int:
        return self._gpu_value(device, index, lambda gpu: gpu.index)

    @c_symbol
    def nvmlDeviceGetMinorNumber(self, device: Any, minor: Any) -> int:
        return self._gpu_value(device, minor, lambda gpu: gpu.minor_number)

    def _gpu_value(self, device: Any, out: Any, read: Any) -> int:
        if self.resolve(device, "mig") is not None:
            return codes.NOT_SUPPORTED
        gpu = self.whole_gpu(device)
        if gpu is None or not marshal.write_value(out, read(gpu)):
            return codes.INVALID_ARGUMENT
        return codes.SUCCESS

    @c_symbol
    def nvmlDeviceGetPciInfo_v3(self, device: Any, pci: Any) -> int:
        gpu = self.whole_gpu(device)
        info = marshal.target(pci)
        if gpu is None or info is None:
            return codes.INVALID_ARGUMENT
        domain, bus, rest = gpu.pci_bus_id.split(":")
        info.busIdLegacy = f"{int(domain, 16) & 0xFFFF:04x}:{bus}:{rest}".encode()
        info.busId = gpu.pci_bus_id.encode()
        info.domain, info.bus = int(domain, 16), int(bus, 16)
        info.device = int(rest.split(".")[0], 16)
        info.pciDeviceId, info.pciSubSystemId = gpu.pci_device_id, gpu.pci_subsystem_id
        return codes.SUCCESS

    @c_symbol
    def nvmlDeviceGetMemoryInfo(self, device: Any, memory: Any) -> int:
        found, info = self.resolve(device, "gpu", "mig"), marshal.target(memory)
        if found is None or info is None:
            return codes.INVALID_ARGUMENT
        total, reserved, used = _memory(found)
        info.total, info.used, info.free = total, reserved + used, total - reserved - used
        return codes.SUCCESS

    @c_symbol
    def nvmlDeviceGetMemoryInfo_v2(self, device: Any, memory: Any) -> int:
        found, info = self.resolve(device, "gpu", "mig"), marshal.target(memory)
        if found is None or info is None:
            return codes.INVALID_ARGUMENT
        if info.version != pynvml.nvmlMemory_v2:
            return codes.ARGUMENT_VERSION_MISMATCH
        total, reserved, used = _memory(found)
        info.total, info.reserved, info.used = total, reserved, used
        info.free = total - reserved - used
        return codes.SUCCESS

    @c_symbol
    def nvmlDeviceGetCudaComputeCapability(self, device: Any, major: Any, minor: Any) -> int:
        found = self.resolve(device, "gpu", "mig")
        if found is None:
            return codes.INVALID_ARGUMENT
        cc_major, cc_minor = found.gpu.cuda_compute_capability
        if not (marshal.write_value(major, cc_major) and marshal.write_value(minor, cc_minor)):
            return codes.INVALID_ARGUMENT
        return codes.SUCCESS

    @c_symbol
    def nvmlDeviceGetComputeRunningProcesses_v3(self, device: Any, count: Any, infos: Any) -> int:
        found, counter = self.resolve(device, "gpu", "mig"), marshal.target(count)
        if found is None or counter is None:
            return codes.INVALID_ARGUMENT
        running = found.gpu.processes_in(found.gi, found.ci) if found.gi else found.gpu.processes
        room = counter.value
        counter.value = len(running)
        if infos is None or room < len(running):
            return codes.SUCCESS if not running else codes.INSUFFICIENT_SIZE
        records = marshal.target(infos)
        for i, process in enumerate(running):
            record = records[i]
            record.pid, record.usedGpuMemory = process.pid, process.used_memory
            record.gpuInstanceId = _or_not_available(process.gpu_instance_id)
            record.computeInstanceId = _or_not_available(process.compute_instance_id)
        return codes.SUCCESS

    @c_symbol
    def nvmlDeviceGetUtilizationRates(self, device: Any, utilization: Any) -> int:
        """The GPU's busy % (the sum of its processes' SM %, at most 100); NOT_SUPPORTED on a
        MIG-enabled GPU or a MIG device, as NVML answers there."""
        found, info = self.resolve(device, "gpu", "mig"), marshal.target(utilization)
        if found is None or info is None:
            return codes.INVALID_ARGUMENT
        if found.gi is not None or found.gpu.mig_enabled:
            return codes.NOT_SUPPORTED
        busy = sum(p.sm_percent or 0 for p in found.gpu.processes)
        info.gpu, info.memory = min(100, busy), 0
        return codes.SUCCESS

    @c_symbol
    def nvmlDeviceGetProcessUtilization(
        self, device: Any, samples: Any, count: Any, last_seen: Any
    ) -> int:
        """One sample per process that has an SM %: NOT_SUPPORTED on MIG ("not currently
        supported on MIG-enabled GPUs"), NOT_FOUND when no process has a sample."""
        found, counter = self.resolve(device, "gpu", "mig"), marshal.target(count)
        if found is None or counter is None:
            return codes.INVALID_ARGUMENT
        if found.gi is not None or found.gpu.mig_enabled:
            return codes.NOT_SUPPORTED
        sampled = [p for p in found.gpu.processes if p.sm_percent is not None]
        if not sampled:
            return codes.NOT_FOUND
        room = counter.value
        counter.value = len(sampled)
        if samples is None or room < len(sampled):
            return codes.INSUFFICIENT_SIZE
        since = marshal.uint(last_seen)
        for i, process in enumerate(sampled):
            record = samples[i]
            record.pid, record.timeStamp = process.pid, since + 1
            record.smUtil, record.memUtil, record.encUtil, record.decUtil = (
                process.sm_percent,
                0,
                0,
                0,
            )
        return codes.SUCCESS

    # -- MIG mode ------------------------------------------------------------------------------

    @c_symbol
    def nvmlDeviceGetMigMode(self, device: Any, current: Any, pending: Any) -> int:
        gpu = self.whole_gpu(device)
        if gpu is None:
            return codes.INVALID_ARGUMENT
        if not gpu.mig_capable:
            return codes.NOT_SUPPORTED
        wrote_current = marshal.write_value(current, gpu.mig_current)
        return status(wrote_current and marshal.write_value(pending, gpu.mig_pending))

    @c_symbol
    def nvmlDeviceSetMigMode(self, device: Any, mode: Any, activation_status: Any) -> int:
        gpu = self.whole_gpu(device)
        if gpu is None or marshal.target(activation_status) is None:
            return codes.INVALID_ARGUMENT
        if not gpu.mig_capable:
            return codes.NOT_SUPPORTED
        if not self.privileged:
            return codes.NO_PERMISSION
        result, activation = gpu.set_mig_mode(marshal.uint(mode))
        marshal.write_value(activation_status, activation)
        return result


def _normalise_bus_id(bus_id: str) -> str:
    """Bus IDs "0000:18:00.0" and "00000000:18:00.0" name the same device, in any case."""
    domain, _, rest = bus_id.strip().lower().partition(":")
    return f"{int(domain, 16):08x}:{rest}" if domain else rest


def _memory(found: HandleTarget) -> tuple[int, int, int]:
    """(total, reserved, used) in bytes of a GPU or of a MIG device's GPU instance."""
    gpu: Gpu = found.gpu
    if found.gi is None:
        return gpu.memory_total, gpu.memory_reserved, gpu.memory_used
    used = sum(p.used_memory for p in gpu.processes_in(found.gi))
    return found.gi.profile.memory_size_mb * MIB, 0, used


def _or_not_available(value: int | None) -> int:
    return NOT_AVAILABLE if value is None else value
