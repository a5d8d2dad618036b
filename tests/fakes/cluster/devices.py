"""What a node's device plugin advertises, as the kubelet's device manager keeps it.

Owns `Device` (one advertised device ID and the physical GPU behind it) and `Resource` (one
registered resource and its devices). What they hold comes from NVIDIA's device plugin over the
kubelet's gRPC (tests/fakes/node/nvidiaplugin.py). Must not decide names or IDs (the plugin
does) or read the store.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Device:
    """One advertised device: its ID as kubelet sees it and the physical device behind it."""

    id: str  # "GPU-…", "GPU-…::2", "MIG-…", "MIG-…::0"
    physical: str  # the NVML UUID
    gpu_index: int


@dataclass(frozen=True)
class Resource:
    """One resource the plugin registers with kubelet (one gRPC socket upstream)."""

    name: str
    devices: tuple[Device, ...]
    replicas: int = 1
    fail_requests_greater_than_one: bool = False
    policy: str = "distributed"

    @property
    def shared(self) -> bool:
        return self.replicas > 1
