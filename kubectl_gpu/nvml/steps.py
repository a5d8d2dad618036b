"""MIG plan steps carried out through NVML: checking a planned GPU instance against the
profiles and placements NVML itself offers, and executing `mig.plan` steps, creating GPU
instances at their explicit placements (`nvmlDeviceCreateGpuInstanceWithPlacement`,
docs/upstream-facts.md M2.5). A GPU reset is not an NVML call (`nvidia-smi -r`), so it is
injected as `reset`. Must not choose the steps or their order (`mig.plan` does)."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import pynvml

from kubectl_gpu.errors import DeviceError
from kubectl_gpu.mig import plan
from kubectl_gpu.nvml import codes, devices

Reset = Callable[[int, str], None]  # (GPU index, PCI bus ID); raises DeviceError


def check(step: plan.CreateGpuInstance) -> None:
    """DeviceError unless NVML has the profile and offers the placement on this GPU.

    A current driver answers this with MIG mode still off (read on an H200, driver 580:
    tests/data/nvml), so a plan is checked before the first change. Where a driver names
    no profile while MIG is off, nothing can be known yet: the check passes, and is made
    again once MIG is on, before the instance is created."""
    handle = devices.handle(step.gpu)
    profiles = devices.gi_profiles(step.gpu, handle)
    if not profiles and not devices.mig_on(step.gpu, handle):
        return
    profile = profiles.get(step.profile)
    if profile is None:
        raise DeviceError(f'GPU {step.gpu}: MIG profile "{step.profile}" not found on this GPU')
    starts = [p.start for p in devices.placements(step.gpu, handle, profile)]
    if step.placement_start not in starts:
        raise DeviceError(
            f"GPU {step.gpu}: NVML offers {step.profile} at memory slices {starts}, "
            f"not at {step.placement_start}"
        )


def execute(step: plan.Step, reset: Reset | None) -> None:
    """Carry out one plan step; DeviceError (RebootRequiredError for a reset that cannot
    happen) when NVML refuses."""
    where = f"GPU {step.gpu}: {type(step).__name__}"
    try:
        _dispatch(step, reset)
    except pynvml.NVMLError as e:
        raise codes.error(where, e) from e


def _dispatch(step: plan.Step, reset: Reset | None) -> None:
    handle = devices.handle(step.gpu)
    if isinstance(step, plan.SetMigMode):
        _set_mode(step, handle)
    elif isinstance(step, plan.ResetGpu):
        _reset_gpu(step.gpu, handle, reset)
    elif isinstance(step, plan.DestroyComputeInstance):
        gi = pynvml.nvmlDeviceGetGpuInstanceById(handle, step.gi)
        pynvml.nvmlComputeInstanceDestroy(pynvml.nvmlGpuInstanceGetComputeInstanceById(gi, step.ci))
    elif isinstance(step, plan.DestroyGpuInstance):
        pynvml.nvmlGpuInstanceDestroy(pynvml.nvmlDeviceGetGpuInstanceById(handle, step.gi))
    elif isinstance(step, plan.CreateGpuInstance):
        _create_gi(step, handle)
    else:
        _create_ci(step, handle)


def _set_mode(step: plan.SetMigMode, handle: Any) -> None:
    mode = pynvml.NVML_DEVICE_MIG_ENABLE if step.enabled else pynvml.NVML_DEVICE_MIG_DISABLE
    activation = pynvml.nvmlDeviceSetMigMode(handle, mode)
    # pynvml checks only the call's own return code; the activation status is ours to read
    if activation == pynvml.NVML_ERROR_IN_USE:
        raise DeviceError(
            f"GPU {step.gpu}: MIG mode change refused: NVML_ERROR_IN_USE (the GPU is not idle)"
        )


def _reset_gpu(index: int, handle: Any, reset: Reset | None) -> None:
    """NVML is shut down around the reset: a process holding NVML open keeps the GPU
    "in use" and `nvidia-smi -r` refuses (handles are looked up afresh afterwards)."""
    if reset is None:
        raise codes.RebootRequiredError(f"GPU {index}: MIG mode change waits for a GPU reset")
    bus = devices.text(pynvml.nvmlDeviceGetPciInfo_v3(handle).busId)
    pynvml.nvmlShutdown()
    try:
        reset(index, bus)
    finally:
        pynvml.nvmlInit()


def _create_gi(step: plan.CreateGpuInstance, handle: Any) -> None:
    profile = devices.gi_profiles(step.gpu, handle)[step.profile]
    size = next(
        p.size
        for p in devices.placements(step.gpu, handle, profile)
        if p.start == step.placement_start
    )
    placement = pynvml.c_nvmlGpuInstancePlacement_t(step.placement_start, size)
    pynvml.nvmlDeviceCreateGpuInstanceWithPlacement(handle, profile.id, ctypes.byref(placement))


def _create_ci(step: plan.CreateComputeInstance, handle: Any) -> None:
    profile = devices.gi_profiles(step.gpu, handle)[step.gi_profile]
    gi = next(
        gi
        for gi in devices.instances_of(step.gpu, handle, profile)
        if pynvml.nvmlGpuInstanceGetInfo(gi).placement.start == step.placement_start
    )
    ci_profile = devices.ci_profiles(gi).get(step.profile)
    if ci_profile is None:
        raise DeviceError(f'GPU {step.gpu}: compute profile "{step.profile}" not found')
    pynvml.nvmlGpuInstanceCreateComputeInstance(gi, ci_profile.id)
