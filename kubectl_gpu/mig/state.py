"""A node's live MIG state, as NVML reports it: GPUs, their MIG mode, GPU and compute instances.

Owns the frozen values the node agent reads through NVML (`nvml/`) and `plan.make`
compares with a desired config. Profile names are as mig-parted names the instances it reads
back: `3g.40gb` for a GPU instance, and for a compute instance the MIG device's name (`3g.40gb`
when it spans its GPU instance, `1c.3g.40gb` when smaller). Placements are in memory slices.
Must not read anything itself, nor decide anything. Pure: standard library only.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ComputeInstance:
    """A compute instance: NVML's id inside its GPU instance, and its MIG device profile."""

    id: int
    profile: str


@dataclasses.dataclass(frozen=True)
class GpuInstance:
    """A GPU instance: NVML's id, its profile, placement and compute instances."""

    id: int
    profile: str
    placement_start: int
    placement_size: int
    compute_instances: tuple[ComputeInstance, ...] = ()


@dataclasses.dataclass(frozen=True)
class GpuState:
    """One GPU: NVML index, UUID, product name, PCI device+vendor ID and MIG state.

    `mode_current` / `mode_pending` are True for MIG enabled; they differ while a mode change
    waits for a GPU reset (Ampere) or a reboot.
    """

    index: int
    uuid: str
    model: str
    pci_device_id: int
    mig_capable: bool
    mode_current: bool = False
    mode_pending: bool = False
    gpu_instances: tuple[GpuInstance, ...] = ()


@dataclasses.dataclass(frozen=True)
class MigState:
    """Every GPU of a node, in NVML index order."""

    gpus: tuple[GpuState, ...]

    def gpu(self, index: int) -> GpuState:
        """The GPU with this index (KeyError when the node has none)."""
        for gpu in self.gpus:
            if gpu.index == index:
                return gpu
        raise KeyError(index)
