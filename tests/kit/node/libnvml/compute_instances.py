"""NVML C symbols for compute instances and MIG device handles, in the stand-in (test code only).

Owns: compute-instance profile info (v1, V), possible placements, remaining capacity, create
(with and without placement), destroy, list, lookup by ID and nvmlComputeInstanceGetInfo_v2; and
the MIG device handle symbols: max count, handle by index, is-MIG, GPU/compute instance IDs and the
parent handle. Must not: hold placement rules (instances.py) or GPU-instance symbols.
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
from tests.kit.node.libnvml.instances import GpuInstance
from tests.kit.node.libnvml.models import ComputeInstanceProfile, mig_device_profile


class ComputeInstanceSymbols(SymbolCore):
    """Compute-instance symbols and MIG device handles."""

    # -- profiles ------------------------------------------------------------------------------

    @c_symbol
    def nvmlGpuInstanceGetComputeInstanceProfileInfo(
        self, gpu_instance: Any, profile: Any, engine_profile: Any, info: Any
    ) -> int:
        return self._ci_profile_info(gpu_instance, profile, engine_profile, info)

    @c_symbol
    def nvmlGpuInstanceGetComputeInstanceProfileInfoV(
        self, gpu_instance: Any, profile: Any, engine_profile: Any, info: Any
    ) -> int:
        version = getattr(marshal.target(info), "version", None)
        if version != pynvml.nvmlComputeInstanceProfileInfo_v2:
            return codes.ARGUMENT_VERSION_MISMATCH
        return self._ci_profile_info(gpu_instance, profile, engine_profile, info)

    def _ci_profile_info(self, gpu_instance: Any, profile: Any, engine: Any, info: Any) -> int:
        found, out = self.resolve(gpu_instance, "gi"), marshal.target(info)
        enum, engine_value = marshal.uint(profile), marshal.uint(engine)
        if found is None or found.gi is None or out is None:
            return codes.INVALID_ARGUMENT
        if enum >= pynvml.NVML_COMPUTE_INSTANCE_PROFILE_COUNT or (
            engine_value >= pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT
        ):
            return codes.INVALID_ARGUMENT
        ci_profile = found.gi.ci_profile(enum)
        if ci_profile is None:
            return codes.NOT_SUPPORTED
        _fill_profile_info(out, found.gi, ci_profile)
        return codes.SUCCESS

    @c_symbol
    def nvmlGpuInstanceGetComputeInstancePossiblePlacements(
        self, gpu_instance: Any, profile_id: Any, placements: Any, count: Any
    ) -> int:
        result, gi, ci_profile = self._gi_and_profile(gpu_instance, profile_id)
        counter = marshal.target(count)
        if gi is None or ci_profile is None or counter is None:
            return result if result != codes.SUCCESS else codes.INVALID_ARGUMENT
        pairs = [(start, ci_profile.slice_count) for start in ci_profile.starts]
        return marshal.write_placements(placements, counter, pairs)

    @c_symbol
    def nvmlGpuInstanceGetComputeInstanceRemainingCapacity(
        self, gpu_instance: Any, profile_id: Any, count: Any
    ) -> int:
        result, gi, ci_profile = self._gi_and_profile(gpu_instance, profile_id)
        if gi is None or ci_profile is None:
            return result
        found = self.resolve(gpu_instance, "gi")
        assert found is not None
        left = found.gpu.mig.ci_remaining_capacity(gi, ci_profile)
        return status(marshal.write_value(count, left))

    def _gi_and_profile(
        self, gpu_instance: Any, profile_id: Any
    ) -> tuple[int, GpuInstance | None, ComputeInstanceProfile | None]:
        found = self.resolve(gpu_instance, "gi")
        if found is None or found.gi is None:
            return codes.INVALID_ARGUMENT, None, None
        ci_profile = found.gi.ci_profile(marshal.uint(profile_id))
        if ci_profile is None:
            return codes.NOT_SUPPORTED, found.gi, None
        return codes.SUCCESS, found.gi, ci_profile

    # -- create, destroy -----------------------------------------------------------------------

    @c_symbol
    def nvmlGpuInstanceCreateComputeInstance(
        self, gpu_instance: Any, profile_id: Any, instance: Any
    ) -> int:
        return self._create_ci(gpu_instance, profile_id, None, instance)

    @c_symbol
    def nvmlGpuInstanceCreateComputeInstanceWithPlacement(
        self, gpu_instance: Any, profile_id: Any, placement: Any, instance: Any
    ) -> int:
        requested = marshal.target(placement)
        if requested is None:
            return codes.INVALID_ARGUMENT
        at = (requested.start, requested.size)
        return self._create_ci(gpu_instance, profile_id, at, instance)

    def _create_ci(
        self, gpu_instance: Any, profile_id: Any, at: tuple[int, int] | None, instance: Any
    ) -> int:
        result, gi, ci_profile = self._gi_and_profile(gpu_instance, profile_id)
        if gi is None or ci_profile is None:
            return result
        if not self.privileged:
            return codes.NO_PERMISSION
        if marshal.target(instance) is None or (at is not None and at[1] != ci_profile.slice_count):
            return codes.INVALID_ARGUMENT
        found = self.resolve(gpu_instance, "gi")
        assert found is not None
        start = at[0] if at is not None else None
        result, ci = found.gpu.mig.create_compute_instance(gi, ci_profile, start)
        if ci is not None:
            self.handles.write(instance, self.ci_target(found.gpu, gi, ci))
        return result

    @c_symbol
    def nvmlComputeInstanceDestroy(self, compute_instance: Any) -> int:
        found = self.resolve(compute_instance, "ci")
        if found is None or found.gi is None or found.ci is None:
            return codes.INVALID_ARGUMENT
        if not self.privileged:
            return codes.NO_PERMISSION
        return found.gpu.destroy_compute_instance(found.gi, found.ci)

    # -- lookups -------------------------------------------------------------------------------

    @c_symbol
    def nvmlGpuInstanceGetComputeInstances(
        self, gpu_instance: Any, profile_id: Any, instances: Any, count: Any
    ) -> int:
        result, gi, ci_profile = self._gi_and_profile(gpu_instance, profile_id)
        counter, found = marshal.target(count), self.resolve(gpu_instance, "gi")
        if gi is None or ci_profile is None or found is None:
            return result
        if counter is None or instances is None:
            return codes.INVALID_ARGUMENT
        existing = [
            ci for _, ci in sorted(gi.compute_instances.items()) if ci.profile == ci_profile
        ]
        room = marshal.capacity(instances)
        if room is not None and room < len(existing):
            return codes.INSUFFICIENT_SIZE
        for i, ci in enumerate(existing):
            handle_target = self.ci_target(found.gpu, gi, ci)
            pointer = self.handles.pointer(handle_target, pynvml.c_nvmlComputeInstance_t)
            marshal.elements(instances)[i] = pointer
        counter.value = len(existing)
        return codes.SUCCESS

    @c_symbol
    def nvmlGpuInstanceGetComputeInstanceById(
        self, gpu_instance: Any, ci_id: Any, instance: Any
    ) -> int:
        found = self.resolve(gpu_instance, "gi")
        if found is None or found.gi is None:
            return codes.INVALID_ARGUMENT
        ci = found.gi.compute_instances.get(marshal.uint(ci_id))
        if ci is None:
            return codes.NOT_FOUND
        return status(self.handles.write(instance, self.ci_target(found.gpu, found.gi, ci)))

    @c_symbol
    def nvmlComputeInstanceGetInfo_v2(self, compute_instance: Any, info: Any) -> int:
        found, out = self.resolve(compute_instance, "ci"), marshal.target(info)
        if found is None or found.gi is None or found.ci is None or out is None:
            return codes.INVALID_ARGUMENT
        out.device = self.handles.pointer(self.gpu_target(found.gpu), pynvml.c_nvmlDevice_t)
        out.gpuInstance = self.handles.pointer(
            self.gi_target(found.gpu, found.gi), pynvml.c_nvmlGpuInstance_t
        )
        out.id, out.profileId = found.ci.id, found.ci.profile.enum
        out.placement.start, out.placement.size = found.ci.start, found.ci.profile.slice_count
        return codes.SUCCESS

    # -- MIG device handles --------------------------------------------------------------------

    @c_symbol
    def nvmlDeviceGetMaxMigDeviceCount(self, device: Any, count: Any) -> int:
        gpu = self.whole_gpu(device)
        if gpu is None or not marshal.write_value(count, gpu.max_mig_devices):
            return codes.INVALID_ARGUMENT
        return codes.SUCCESS

    @c_symbol
    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: Any, index: Any, mig: Any) -> int:
        gpu = self.whole_gpu(device)
        if gpu is None:
            return codes.INVALID_ARGUMENT
        if not gpu.mig_capable:
            return codes.NOT_SUPPORTED
        position = marshal.uint(index)
        if not gpu.mig_enabled:
            return codes.NOT_FOUND  # what a real driver answers with MIG off (tests/data/nvml)
        if position >= gpu.max_mig_devices:
            return codes.INVALID_ARGUMENT
        devices = gpu.mig.mig_devices()
        if position >= len(devices):
            return codes.NOT_FOUND
        gi, ci = devices[position]
        return status(self.handles.write(mig, self.mig_target(gpu, gi, ci)))

    @c_symbol
    def nvmlDeviceIsMigDeviceHandle(self, device: Any, is_mig: Any) -> int:
        found = self.resolve(device, "gpu", "mig")
        if found is None or not marshal.write_value(is_mig, int(found.kind == "mig")):
            return codes.INVALID_ARGUMENT
        return codes.SUCCESS

    @c_symbol
    def nvmlDeviceGetGpuInstanceId(self, device: Any, gi_id: Any) -> int:
        return self._mig_value(device, gi_id, lambda found: found.gi.id)

    @c_symbol
    def nvmlDeviceGetComputeInstanceId(self, device: Any, ci_id: Any) -> int:
        return self._mig_value(device, ci_id, lambda found: found.ci.id)

    def _mig_value(self, device: Any, out: Any, read: Any) -> int:
        found = self.resolve(device, "mig")
        if found is None or not marshal.write_value(out, read(found)):
            return codes.INVALID_ARGUMENT
        return codes.SUCCESS

    @c_symbol
    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, mig: Any, device: Any) -> int:
        found = self.resolve(mig, "mig")
        if found is None or not self.handles.write(device, self.gpu_target(found.gpu)):
            return codes.INVALID_ARGUMENT
        return codes.SUCCESS


def _fill_profile_info(out: Any, gi: GpuInstance, profile: ComputeInstanceProfile) -> None:
    shared = gi.profile  # engines are shared among the GPU instance's compute instances
    out.id, out.sliceCount = profile.enum, profile.slice_count
    out.instanceCount = profile.instance_count
    out.multiprocessorCount = profile.multiprocessor_count
    out.sharedCopyEngineCount = shared.copy_engine_count
    out.sharedDecoderCount = shared.decoder_count
    out.sharedEncoderCount = shared.encoder_count
    out.sharedJpegCount, out.sharedOfaCount = shared.jpeg_count, shared.ofa_count
    if hasattr(out, "name"):  # the v2 struct
        out.name = f"MIG {mig_device_profile(shared, profile.slice_count)}".encode()
