"""NVML C symbols for GPU-instance profiles and GPU instances, in the stand-in (test code only).

Owns: nvmlDeviceGetGpuInstanceProfileInfo (v1, V, ByIdV), possible placements (_v2), remaining
capacity, create (with and without placement), destroy, list by profile, lookup by ID and
nvmlGpuInstanceGetInfo, with the return codes nvml.h documents for each. Must not: hold the
placement rules (instances.py) or compute-instance and MIG-device symbols (compute_instances.py).
"""

from __future__ import annotations

from typing import Any

import pynvml

from tests.kit.node.libnvml import codes, marshal
from tests.kit.node.libnvml.base import (
    SymbolCore,
    c_symbol,
    status,
)
from tests.kit.node.libnvml.models import GpuInstanceProfile, Placement

# GPU-instance profile enums the played driver (580, as read in tests/data/nvml) knows: pynvml
# also names NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX (17), which that driver calls invalid.
DRIVER_PROFILE_ENUMS = 17


class GpuInstanceSymbols(SymbolCore):
    """GPU-instance profile and GPU-instance symbols."""

    # -- profiles ------------------------------------------------------------------------------

    @c_symbol
    def nvmlDeviceGetGpuInstanceProfileInfo(self, device: Any, profile: Any, info: Any) -> int:
        return self._gi_profile_info(device, profile, info, by_id=False)

    @c_symbol
    def nvmlDeviceGetGpuInstanceProfileInfoV(self, device: Any, profile: Any, info: Any) -> int:
        if getattr(marshal.target(info), "version", None) != pynvml.nvmlGpuInstanceProfileInfo_v2:
            return codes.ARGUMENT_VERSION_MISMATCH
        return self._gi_profile_info(device, profile, info, by_id=False)

    @c_symbol
    def nvmlDeviceGetGpuInstanceProfileInfoByIdV(
        self, device: Any, profile_id: Any, info: Any
    ) -> int:
        if getattr(marshal.target(info), "version", None) != pynvml.nvmlGpuInstanceProfileInfo_v2:
            return codes.ARGUMENT_VERSION_MISMATCH
        return self._gi_profile_info(device, profile_id, info, by_id=True)

    def _gi_profile_info(self, device: Any, key: Any, info: Any, by_id: bool) -> int:
        # A real driver (tests/data/nvml) answers with MIG mode off too, and takes an enum
        # newer than itself for an invalid argument, not an unsupported profile.
        out, value, gpu = marshal.target(info), marshal.uint(key), self.whole_gpu(device)
        if out is None or gpu is None or (not by_id and value >= DRIVER_PROFILE_ENUMS):
            return codes.INVALID_ARGUMENT
        found = gpu.mig.profile_by_id(value) if by_id else gpu.mig.profile_by_enum(value)
        if found is None:
            return codes.NOT_SUPPORTED
        _fill_profile_info(out, found)
        return codes.SUCCESS

    @c_symbol
    def nvmlDeviceGetGpuInstancePossiblePlacements_v2(
        self, device: Any, profile_id: Any, placements: Any, count: Any
    ) -> int:
        # "returns all the possible placements for the given profile regardless of whether
        # MIG is enabled or not" (nvml.h)
        gpu, counter = self.whole_gpu(device), marshal.target(count)
        if gpu is None or counter is None:
            return codes.INVALID_ARGUMENT
        profile = gpu.mig.profile_by_id(marshal.uint(profile_id))
        if profile is None:
            return codes.NOT_SUPPORTED
        pairs = [(p.start, p.size) for p in profile.placements]
        return marshal.write_placements(placements, counter, pairs)

    @c_symbol
    def nvmlDeviceGetGpuInstanceRemainingCapacity(
        self, device: Any, profile_id: Any, count: Any
    ) -> int:
        gpu = self.whole_gpu(device)  # answered with MIG mode off too, as a real driver does
        if gpu is None:
            return codes.INVALID_ARGUMENT
        profile = gpu.mig.profile_by_id(marshal.uint(profile_id))
        if profile is None:
            return codes.NOT_SUPPORTED
        return status(marshal.write_value(count, gpu.mig.remaining_capacity(profile)))

    # -- create, destroy -----------------------------------------------------------------------

    @c_symbol
    def nvmlDeviceCreateGpuInstance(self, device: Any, profile_id: Any, instance: Any) -> int:
        return self._create_gi(device, profile_id, None, instance)

    @c_symbol
    def nvmlDeviceCreateGpuInstanceWithPlacement(
        self, device: Any, profile_id: Any, placement: Any, instance: Any
    ) -> int:
        requested = marshal.target(placement)
        if requested is None:
            return codes.INVALID_ARGUMENT
        at = Placement(requested.start, requested.size)
        return self._create_gi(device, profile_id, at, instance)

    def _create_gi(self, device: Any, profile_id: Any, at: Placement | None, instance: Any) -> int:
        result, gpu = self.mig_gpu(device)
        if gpu is None:
            return result
        if not self.privileged:
            return codes.NO_PERMISSION
        profile = gpu.mig.profile_by_id(marshal.uint(profile_id))
        if profile is None or marshal.target(instance) is None:
            return codes.INVALID_ARGUMENT
        result, gi = gpu.mig.create_gpu_instance(profile, at)
        if gi is not None:
            self.handles.write(instance, self.gi_target(gpu, gi))
        return result

    @c_symbol
    def nvmlGpuInstanceDestroy(self, gpu_instance: Any) -> int:
        found = self.resolve(gpu_instance, "gi")
        if found is None or found.gi is None:
            return codes.INVALID_ARGUMENT
        if not self.privileged:
            return codes.NO_PERMISSION
        return found.gpu.destroy_gpu_instance(found.gi)

    # -- lookups -------------------------------------------------------------------------------

    @c_symbol
    def nvmlDeviceGetGpuInstances(
        self, device: Any, profile_id: Any, instances: Any, count: Any
    ) -> int:
        result, gpu = self.mig_capable_gpu(device)  # with MIG off: none (a real driver's answer)
        if gpu is None:
            return result
        profile = gpu.mig.profile_by_id(marshal.uint(profile_id))
        counter = marshal.target(count)
        if profile is None or counter is None or instances is None:
            return codes.INVALID_ARGUMENT
        existing = gpu.mig.instances_of(profile)
        room = marshal.capacity(instances)
        if room is not None and room < len(existing):
            return codes.INSUFFICIENT_SIZE
        for i, gi in enumerate(existing):
            handle = self.handles.pointer(self.gi_target(gpu, gi), pynvml.c_nvmlGpuInstance_t)
            marshal.elements(instances)[i] = handle
        counter.value = len(existing)
        return codes.SUCCESS

    @c_symbol
    def nvmlDeviceGetGpuInstanceById(self, device: Any, gi_id: Any, instance: Any) -> int:
        result, gpu = self.mig_capable_gpu(device)  # with MIG off: NOT_FOUND, as a real driver
        if gpu is None:
            return result
        gi = gpu.mig.gpu_instances.get(marshal.uint(gi_id))
        if gi is None:
            return codes.NOT_FOUND
        return status(self.handles.write(instance, self.gi_target(gpu, gi)))

    @c_symbol
    def nvmlGpuInstanceGetInfo(self, gpu_instance: Any, info: Any) -> int:
        found, out = self.resolve(gpu_instance, "gi"), marshal.target(info)
        if found is None or found.gi is None or out is None:
            return codes.INVALID_ARGUMENT
        out.device = self.handles.pointer(self.gpu_target(found.gpu), pynvml.c_nvmlDevice_t)
        out.id, out.profileId = found.gi.id, found.gi.profile.id
        out.placement.start = found.gi.placement.start
        out.placement.size = found.gi.placement.size
        return codes.SUCCESS


def _fill_profile_info(out: Any, profile: GpuInstanceProfile) -> None:
    out.id, out.isP2pSupported = profile.id, 0
    out.sliceCount, out.instanceCount = profile.slice_count, profile.instance_count
    out.multiprocessorCount = profile.multiprocessor_count
    out.copyEngineCount, out.decoderCount = profile.copy_engine_count, profile.decoder_count
    out.encoderCount, out.jpegCount = profile.encoder_count, profile.jpeg_count
    out.ofaCount, out.memorySizeMB = profile.ofa_count, profile.memory_size_mb
    if hasattr(out, "name"):  # the v2 struct
        out.name = f"MIG {profile.name}".encode()
        out.version = 0  # the real driver handed the struct back with its version field cleared
