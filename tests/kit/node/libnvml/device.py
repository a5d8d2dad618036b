"""One GPU as the NVML stand-in models it: identity, memory, processes, MIG mode (test code only).

Owns: a GPU's readable facts (index, minor number, UUID, PCI IDs, name, memory, compute
capability), its running compute processes, the Xid errors raised on it, its MIG mode (current and
pending) and how a mode change activates, the ``reset``/``reboot`` test hooks, building a GPU from
a model or from a plain dict of readings, and a JSON-serialisable ``snapshot``. Must not: know
about ctypes or handles (the symbol modules marshal) or hold MIG geometry rules (instances.py and
models.py).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from tests.kit.node.libnvml import codes, models
from tests.kit.node.libnvml.instances import ComputeInstance, GpuInstance, MigLayout
from tests.kit.node.libnvml.models import GpuInstanceProfile, Placement

SUCCESS = codes.SUCCESS
MIB = 1024 * 1024
NOT_AVAILABLE = 0xFFFFFFFF  # NVML's "no GPU/compute instance" in process records
_DGX_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)  # a DGX's GPU bus numbers
_UUID_NAMESPACE = uuid.UUID("0c1e8f3a-2d47-4b8e-9f61-3a5d2c7b9e04")
_ACTIVATIONS = ("immediate", "reset-required")


@dataclass(frozen=True)
class Process:
    """A compute process; on a MIG GPU it runs in one MIG device."""

    pid: int
    used_memory: int  # bytes
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    sm_percent: int | None = None  # nvmlDeviceGetProcessUtilization's smUtil; None: no samples


@dataclass(eq=False)
class Gpu:
    """A physical GPU's state. Build with ``Gpu.of(model_key, index)`` or ``from_readings``."""

    index: int
    minor_number: int
    uuid: str
    name: str
    pci_bus_id: str  # "00000000:18:00.0"
    pci_device_id: int
    pci_subsystem_id: int
    memory_total: int  # bytes
    memory_reserved: int  # bytes, reported by the v2 memory query
    cuda_compute_capability: tuple[int, int]
    profiles: tuple[GpuInstanceProfile, ...]
    mig_activation: str = "immediate"
    mig_mode_survives_reset: bool = False
    mig_current: int = codes.MIG_DISABLE
    mig_pending: int = codes.MIG_DISABLE
    processes: list[Process] = field(default_factory=list)
    # Xid errors raised so far: {seq, xid, gpu_instance_id, compute_instance_id}; the C
    # library delivers them through event sets (the Python stand-in has none).
    xid_events: list[dict[str, Any]] = field(default_factory=list)
    mig: MigLayout = field(init=False)

    def __post_init__(self) -> None:
        if self.mig_activation not in _ACTIVATIONS:
            raise ValueError(f"mig_activation must be one of {_ACTIVATIONS}")
        self.mig = MigLayout(self.profiles, self.uuid)

    @classmethod
    def of(cls, key: str, index: int, **changes: Any) -> Gpu:
        """A GPU of model ``key`` at ``index``, with stable made-up UUID and bus ID."""
        spec = models.model(key)
        bus = _DGX_BUSES[index] if index < len(_DGX_BUSES) else 0xE0 + index
        facts: dict[str, Any] = {
            "index": index,
            "minor_number": index,
            "uuid": f"GPU-{uuid.uuid5(_UUID_NAMESPACE, f'{key}/{index}')}",
            "name": spec.name,
            "pci_bus_id": f"00000000:{bus:02X}:00.0",
            "pci_device_id": spec.pci_device_id,
            "pci_subsystem_id": spec.pci_subsystem_id,
            "memory_total": spec.memory_mib * MIB,
            "memory_reserved": spec.memory_reserved,
            "cuda_compute_capability": spec.cuda_compute_capability,
            "profiles": spec.profiles,
            "mig_activation": spec.mig_activation,
            "mig_mode_survives_reset": spec.mig_mode_survives_reset,
        }
        facts.update(changes)
        return cls(**facts)

    # -- what the GPU reports ------------------------------------------------------------------

    @property
    def mig_capable(self) -> bool:
        """Whether the GPU supports MIG at all."""
        return bool(self.profiles)

    @property
    def mig_enabled(self) -> bool:
        """Whether MIG mode is currently on."""
        return self.mig_capable and self.mig_current == codes.MIG_ENABLE

    @property
    def memory_used(self) -> int:
        """Bytes used by processes."""
        return sum(p.used_memory for p in self.processes)

    @property
    def max_mig_devices(self) -> int:
        """nvmlDeviceGetMaxMigDeviceCount: compute slices while MIG is on, else 0."""
        return max((p.slice_count for p in self.profiles), default=0) if self.mig_enabled else 0

    def processes_in(self, gi: GpuInstance, ci: ComputeInstance | None = None) -> list[Process]:
        """Processes running in a GPU instance (and compute instance, when given)."""
        return [
            p
            for p in self.processes
            if p.gpu_instance_id == gi.id and (ci is None or p.compute_instance_id == ci.id)
        ]

    # -- test hooks ----------------------------------------------------------------------------

    def add_process(
        self,
        pid: int,
        used_mib: int = 256,
        mig_device: tuple[int, int] | None = None,
        sm_percent: int | None = None,
    ) -> Process:
        """Start a compute process, in MIG device (GI ID, CI ID) when given."""
        process = Process(pid, used_mib * MIB, sm_percent=sm_percent)
        if mig_device is not None:
            gi_id, ci_id = mig_device
            gi = self.mig.gpu_instances.get(gi_id)
            if gi is None or ci_id not in gi.compute_instances:
                raise ValueError(f"GPU {self.index} has no MIG device {mig_device}")
            process = Process(pid, used_mib * MIB, gi_id, ci_id, sm_percent)
        self.processes.append(process)
        return process

    def raise_xid(self, xid: int, mig_device: tuple[int, int] | None = None) -> None:
        """An Xid error on this GPU, in MIG device (GI ID, CI ID) when given."""
        gi, ci = mig_device if mig_device is not None else (None, None)
        seq = max((int(e["seq"]) for e in self.xid_events), default=0) + 1
        self.xid_events.append(
            {"seq": seq, "xid": xid, "gpu_instance_id": gi, "compute_instance_id": ci}
        )

    def stop_process(self, pid: int) -> None:
        """End a compute process."""
        self.processes = [p for p in self.processes if p.pid != pid]

    def reset(self) -> int:
        """``nvidia-smi -r`` on this GPU: IN_USE with processes, else apply the pending mode.

        Instances never survive a reset; on Hopper and later neither does MIG mode.
        """
        if self.processes:
            return codes.IN_USE
        self.mig.clear()
        if self.mig_mode_survives_reset:
            self.mig_current = self.mig_pending
        else:
            self.mig_current = self.mig_pending = codes.MIG_DISABLE
        return SUCCESS

    def withhold(self, profile: str) -> None:
        """The driver does not offer this GPU-instance profile (another driver release or
        board variant than the offline geometry assumes)."""
        self.profiles = tuple(p for p in self.profiles if p.name != profile)
        self.mig = MigLayout(self.profiles, self.uuid)

    def reboot(self) -> None:
        """A node reboot: processes end, then the GPU comes back as after a reset."""
        self.processes.clear()
        self.reset()

    # -- NVML operations -----------------------------------------------------------------------

    def set_mig_mode(self, mode: int) -> tuple[int, int]:
        """nvmlDeviceSetMigMode: (return code, activation status)."""
        if not self.mig_capable:
            return codes.NOT_SUPPORTED, SUCCESS
        if mode not in (codes.MIG_DISABLE, codes.MIG_ENABLE):
            return codes.INVALID_ARGUMENT, SUCCESS
        self.mig_pending = mode
        if mode == self.mig_current:
            return SUCCESS, SUCCESS
        if self.processes or self.mig.gpu_instances:
            # "if device unbind fails because the device isn't idle, IN_USE" (nvml.h)
            return SUCCESS, codes.IN_USE
        if self.mig_activation == "reset-required":
            return SUCCESS, codes.RESET_REQUIRED
        self.mig_current = mode
        return SUCCESS, SUCCESS

    def destroy_gpu_instance(self, gi: GpuInstance) -> int:
        """nvmlGpuInstanceDestroy: IN_USE while processes or compute instances remain."""
        if self.processes_in(gi):
            return codes.IN_USE
        return self.mig.destroy_gpu_instance(gi)

    def destroy_compute_instance(self, gi: GpuInstance, ci: ComputeInstance) -> int:
        """nvmlComputeInstanceDestroy: IN_USE while a process runs in it."""
        if self.processes_in(gi, ci):
            return codes.IN_USE
        return self.mig.destroy_compute_instance(gi, ci)

    # -- plain data ----------------------------------------------------------------------------

    @classmethod
    def from_readings(cls, readings: dict[str, Any]) -> Gpu:
        """A GPU from a plain dict of readings, as ``snapshot()`` writes and a real GPU yields.

        Keys: index, minor_number, uuid, name, pci {bus_id, device_id, subsystem_id},
        memory {total, reserved} (bytes), cuda_compute_capability [major, minor],
        mig {current, pending, activation, survives_reset} or null (no MIG), and
        gi_profiles: [{enum, id, name, slice_count, instance_count, memory_size_mb,
        multiprocessor_count, copy_engine_count, decoder_count, encoder_count, jpeg_count,
        ofa_count, placements: [[start, size], ...]}]. IDs may be ints or "0x…" strings.
        """
        mig = readings.get("mig") or {}
        major, minor = readings["cuda_compute_capability"]
        profiles = tuple(_profile_from_readings(p) for p in readings.get("gi_profiles", ()))
        return cls(
            index=readings["index"],
            minor_number=readings.get("minor_number", readings["index"]),
            uuid=readings["uuid"],
            name=readings["name"],
            pci_bus_id=readings["pci"]["bus_id"],
            pci_device_id=_int(readings["pci"]["device_id"]),
            pci_subsystem_id=_int(readings["pci"].get("subsystem_id", 0)),
            memory_total=readings["memory"]["total"],
            memory_reserved=readings["memory"].get("reserved", 0),
            cuda_compute_capability=(major, minor),
            profiles=profiles,
            mig_activation=mig.get("activation", "immediate"),
            mig_mode_survives_reset=mig.get("survives_reset", False),
            mig_current=mig.get("current", codes.MIG_DISABLE),
            mig_pending=mig.get("pending", mig.get("current", codes.MIG_DISABLE)),
        )

    def snapshot(self) -> dict[str, Any]:
        """State as JSON-serialisable data; its static part round-trips through from_readings."""
        return {
            "index": self.index,
            "minor_number": self.minor_number,
            "uuid": self.uuid,
            "name": self.name,
            "pci": {
                "bus_id": self.pci_bus_id,
                "device_id": f"0x{self.pci_device_id:08X}",
                "subsystem_id": f"0x{self.pci_subsystem_id:08X}",
            },
            "memory": {
                "total": self.memory_total,
                "reserved": self.memory_reserved,
                "used": self.memory_used,
            },
            "cuda_compute_capability": list(self.cuda_compute_capability),
            "mig": self._mig_snapshot(),
            "gi_profiles": [_profile_snapshot(p) for p in self.profiles],
            "gpu_instances": self.mig.snapshot(),
            "processes": [vars(p).copy() for p in self.processes],
            "xid_events": [dict(e) for e in self.xid_events],
        }

    def _mig_snapshot(self) -> dict[str, Any] | None:
        if not self.mig_capable:
            return None
        return {
            "current": self.mig_current,
            "pending": self.mig_pending,
            "activation": self.mig_activation,
            "survives_reset": self.mig_mode_survives_reset,
        }


def _int(value: int | str) -> int:
    return value if isinstance(value, int) else int(value, 0)


_PROFILE_COUNTS = (
    "enum", "id", "slice_count", "instance_count", "memory_size_mb", "multiprocessor_count",
    "copy_engine_count", "decoder_count", "encoder_count", "jpeg_count", "ofa_count",
)  # fmt: skip


def _profile_from_readings(row: dict[str, Any]) -> GpuInstanceProfile:
    name = row["name"].removeprefix("MIG ")
    counts = {key: row.get(key, 0) for key in _PROFILE_COUNTS}
    placements = tuple(Placement(start, size) for start, size in row["placements"])
    return GpuInstanceProfile(name=name, placements=placements, **counts)


def _profile_snapshot(profile: GpuInstanceProfile) -> dict[str, Any]:
    row: dict[str, Any] = {key: getattr(profile, key) for key in _PROFILE_COUNTS}
    row["name"] = f"MIG {profile.name}"
    row["placements"] = [[p.start, p.size] for p in profile.placements]
    return row
