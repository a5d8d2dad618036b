"""Resolving a device ID to the physical GPU (and MIG device) NVML reports on the node.

Owns parsing each device ID once per map and looking it up in an optional NVML inventory
by UUID, MIG UUID, GPU instance or device-node number. Pure: standard library only.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubectl_gpu.gpumap import deviceid
from kubectl_gpu.gpumap.allocations import Gpu, MigDevice
from kubectl_gpu.gpumap.deviceid import DeviceId, Kind


class ParsedIds(dict[str, DeviceId]):
    """Each device ID parsed once per map: rows, their order and the findings all need it
    (parsed three times, 100,000 IDs took 1.5 s)."""

    def __missing__(self, raw: str) -> DeviceId:
        found = self[raw] = deviceid.parse(raw)
        return found


class Inventory:
    """The GPUs NVML reports on the node (`known` False: NVML was not read)."""

    def __init__(self, gpus: Sequence[Gpu] | None) -> None:
        self.known = gpus is not None
        self.gpus = tuple(gpus or ())
        self.by_uuid = {g.uuid.lower(): g for g in self.gpus}
        self.mig_by_uuid = {m.uuid.lower(): (g, m) for g in self.gpus for m in g.mig_devices}

    def locate(self, device: DeviceId) -> tuple[Gpu | None, MigDevice | None]:
        if not self.gpus:  # offline (no NVML): nothing to find, 100,000 times
            return None, None
        if device.kind is Kind.MIG or (device.kind is Kind.LEGACY_MIG and self._has(device)):
            return self.mig_by_uuid.get(str(device.mig_uuid).lower(), (None, None))
        gpu = self._gpu(device)
        if gpu is None or device.gi is None:
            return gpu, None
        mig = next((m for m in gpu.mig_devices if (m.gi, m.ci) == (device.gi, device.ci)), None)
        if mig is None and device.ci is None:  # GKE names the GPU instance only
            mig = next((m for m in gpu.mig_devices if m.gi == device.gi), None)
        return gpu, mig

    def has_gpu(self, uuid: str | None) -> bool:
        return uuid is not None and uuid.lower() in self.by_uuid

    def _has(self, device: DeviceId) -> bool:
        return str(device.mig_uuid).lower() in self.mig_by_uuid

    def _gpu(self, device: DeviceId) -> Gpu | None:
        if device.gpu_uuid is not None:
            return self.by_uuid.get(device.gpu_uuid.lower())
        if device.kind is Kind.TEGRA and len(self.gpus) == 1:
            return self.gpus[0]
        if device.kind is Kind.GKE:  # nvidia<N> is the device node; NVML's minor when known
            return next((g for g in self.gpus if _number_of(g) == device.index), None)
        return None


def _number_of(gpu: Gpu) -> int | None:
    return gpu.minor if gpu.minor is not None else gpu.index
