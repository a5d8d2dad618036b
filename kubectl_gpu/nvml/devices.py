"""A GPU's handles as NVML gives them: the handle of a GPU or of one of its MIG devices, its
MIG mode, memory, and the GPU- and compute-instance profiles and placements NVML lists for
it. The small reads the state, process and step modules share. Must not decide anything."""

from __future__ import annotations

import ctypes
import dataclasses
from collections.abc import Callable
from typing import Any

import pynvml

from kubectl_gpu.nvml import codes

_NAME_PREFIX = "MIG "


@dataclasses.dataclass(frozen=True)
class Profile:
    """A GPU- or compute-instance profile as NVML numbers it on one GPU."""

    id: int
    name: str
    instance_count: int


def handle(index: int) -> Any:
    """The GPU's NVML handle; DeviceError naming the GPU if NVML has none."""
    try:
        return pynvml.nvmlDeviceGetHandleByIndex(index)
    except pynvml.NVMLError as e:
        raise codes.error(f"GPU {index}", e) from e


def text(value: Any) -> str:
    """An NVML string (bytes from older bindings) as text."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def optional(read: Callable[[], int]) -> int | None:
    """A reading some GPUs or drivers do not offer: None instead of an error."""
    try:
        return read()
    except pynvml.NVMLError:
        return None


def memory(device: Any) -> tuple[int | None, int | None]:
    """(total, used) bytes of a GPU or MIG device; None where NVML does not say."""
    try:
        info = pynvml.nvmlDeviceGetMemoryInfo(device)
    except pynvml.NVMLError:
        return None, None
    return int(info.total), int(info.used)


def mig_on(index: int, device: Any) -> bool:
    """Whether MIG is on now; DeviceError if NVML cannot say."""
    try:
        current, _ = pynvml.nvmlDeviceGetMigMode(device)
    except pynvml.NVMLError as e:
        raise codes.error(f"GPU {index}", e) from e
    return bool(current == pynvml.NVML_DEVICE_MIG_ENABLE)


def mig_enabled(device: Any) -> bool:
    """Whether MIG is on now; False for a GPU that is not MIG-capable."""
    try:
        current, _ = pynvml.nvmlDeviceGetMigMode(device)
    except pynvml.NVMLError:
        return False
    return bool(current == pynvml.NVML_DEVICE_MIG_ENABLE)


def mig_handle(device: Any, gi: int | None, ci: int | None) -> Any:
    """The handle of the GPU's MIG device on GPU instance `gi`, compute instance `ci`; None
    when there is none (or NVML cannot enumerate them)."""
    try:
        for j in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(device)):
            try:
                mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(device, j)
            except pynvml.NVMLError:
                continue
            if (pynvml.nvmlDeviceGetGpuInstanceId(mig),
                    pynvml.nvmlDeviceGetComputeInstanceId(mig)) == (gi, ci):  # fmt: skip
                return mig
    except pynvml.NVMLError:
        return None
    return None


def gi_profiles(index: int, device: Any) -> dict[str, Profile]:
    """The GPU-instance profiles NVML reports, by name (some drivers only with MIG on)."""
    found: dict[str, Profile] = {}
    for enum in range(pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT):
        try:
            info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(device, enum)
        except (pynvml.NVMLError_NotSupported, pynvml.NVMLError_InvalidArgument):
            continue  # nvml.h: skip unsupported profiles
        except pynvml.NVMLError as e:
            raise codes.error(f"GPU {index}: reading GPU instance profiles", e) from e
        name = text(info.name).removeprefix(_NAME_PREFIX)
        found.setdefault(name, Profile(info.id, name, info.instanceCount))
    return found


def ci_profiles(gi: Any) -> dict[str, Profile]:
    """The compute-instance profiles NVML reports inside a GPU instance, by name."""
    found: dict[str, Profile] = {}
    shared = pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
    for enum in range(pynvml.NVML_COMPUTE_INSTANCE_PROFILE_COUNT):
        try:
            info = pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, enum, shared)
        except (pynvml.NVMLError_NotSupported, pynvml.NVMLError_InvalidArgument):
            continue
        name = text(info.name).removeprefix(_NAME_PREFIX)
        found.setdefault(name, Profile(info.id, name, info.instanceCount))
    return found


def instances_of(index: int, device: Any, profile: Profile) -> list[Any]:
    """The GPU's GPU instances of one profile."""
    array = (pynvml.c_nvmlGpuInstance_t * max(1, profile.instance_count))()
    count = ctypes.c_uint()
    try:
        pynvml.nvmlDeviceGetGpuInstances(device, profile.id, array, ctypes.byref(count))
    except pynvml.NVMLError as e:
        raise codes.error(f"GPU {index}: listing {profile.name} GPU instances", e) from e
    return [array[i] for i in range(count.value)]


def placements(index: int, device: Any, profile: Profile) -> list[Any]:
    """The placements NVML offers for a GPU-instance profile on the GPU."""
    count = ctypes.c_uint()
    try:
        pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(
            device, profile.id, None, ctypes.byref(count)
        )
        array = (pynvml.c_nvmlGpuInstancePlacement_t * max(1, count.value))()
        pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(
            device, profile.id, array, ctypes.byref(count)
        )
    except pynvml.NVMLError as e:
        raise codes.error(f"GPU {index}: placements of {profile.name}", e) from e
    return [array[i] for i in range(count.value)]
