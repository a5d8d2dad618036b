"""NVML's per-process and per-device readings, as the agent takes them (docs/top.md).

Owns the frozen values `nvml.Session.usage()` returns: a GPU's memory totals and
utilisation, its MIG devices with their own memory, and its compute processes with their
used memory, GPU/compute instance and SM %. A figure NVML does not give is None, with the
reason beside it (`SM_*`): per-process SM % is not supported on a MIG-enabled GPU, and
NVML says NOT_FOUND when it has no samples in the window. Pure: standard library only.
"""

from __future__ import annotations

import dataclasses

# Why a GPU or a process has no SM figure (the `smUnavailable` field of docs/top.md).
SM_MIG = "mig"  # NVML: process utilisation is not supported on MIG-enabled GPUs
SM_NO_SAMPLES = "no-samples"  # NVML_ERROR_NOT_FOUND: nothing sampled since the timestamp
SM_NOT_SUPPORTED = "not-supported"  # this GPU or driver does not offer it
SM_NOT_READ = "not-read"  # an NVML error other than the above (logged by the agent)


@dataclasses.dataclass(frozen=True)
class ProcessReading:
    """One compute process on a GPU: host PID, bytes of GPU memory it holds, the MIG
    device it runs in (GI/CI IDs, None outside MIG) and its SM % over the last window."""

    pid: int
    used_memory: int | None
    gpu_instance: int | None = None
    compute_instance: int | None = None
    sm_percent: int | None = None
    sm_unavailable: str | None = None


@dataclasses.dataclass(frozen=True)
class MigReading:
    """A MIG device: its UUID, profile, GI/CI IDs, its own memory (the instance's) and its
    GPU instance's placement on the GPU (start and size in memory slices, as NVML's
    `nvmlGpuInstancePlacement_t` and `nvidia-smi mig -lgi` give it)."""

    uuid: str
    profile: str | None
    gpu_instance: int | None
    compute_instance: int | None
    memory_total: int | None
    memory_used: int | None
    placement_start: int | None = None
    placement_size: int | None = None


@dataclasses.dataclass(frozen=True)
class GpuReading:
    """A physical GPU: identity, memory totals, utilisation, MIG devices, processes."""

    index: int
    uuid: str
    model: str | None
    memory_total: int | None
    memory_used: int | None
    sm_percent: int | None
    sm_unavailable: str | None
    mig_enabled: bool
    mig_devices: tuple[MigReading, ...] = ()
    processes: tuple[ProcessReading, ...] = ()
