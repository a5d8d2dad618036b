"""Simulated nodes: their GPUs (the NVML stand-in's `Gpu` objects), MIG set-up and Node objects.

Owns `NodeSpec` (what a test asks for), `SimNode` (one node's GPUs, kept in the node's state file
once it has one, so that NVIDIA's binaries and the agent, through the project's libnvidia-ml.so.1,
and the simulation's own Python see the same GPUs), MIG changes made through those `Gpu`
objects, read-only `GpuView` snapshots the test-side stand-ins (dcgm-exporter, GPU workloads)
and tests read, and the Node object a kubelet would register. Must not write to the store or
decide what the device plugin advertises (NVIDIA's does).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.kit.kube.objects import node as sample_node
from tests.kit.node.libnvml import FakeLibNvml, Gpu, Process, codes
from tests.kit.node.libnvml.models import compute_profiles, mig_device_profile
from tests.kit.node.libnvml.statefile import GpuStateFile

Obj = dict[str, Any]
MIB = 1024 * 1024
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
NFD_NVIDIA_PCI = "feature.node.kubernetes.io/pci-10de.present"
DEPLOY_DEVICE_PLUGIN = "nvidia.com/gpu.deploy.device-plugin"
_UUIDS = uuid.UUID("3b1f6c2e-8d4a-4f0b-9c57-2e6a1d9f0c88")


@dataclass(frozen=True)
class NodeSpec:
    """A node to simulate: `model_key` is a libnvml model (or "none" with count 0 for CPU)."""

    name: str
    model_key: str = "none"
    count: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, str]] = ()
    gpu_taint: bool = False  # add nvidia.com/gpu=present:NoSchedule, as many GPU pools do
    mig: Mapping[int, Sequence[str]] = field(default_factory=dict)  # GPU index -> profiles
    # served by NVIDIA's DRA driver (its kubelet plugin, tests/kit/node/draplugin.py) instead
    # of a device plugin: labelled `nvidia.com/gpu.deploy.device-plugin=false`, as NVIDIA's DRA
    # docs ask, so no device-plugin DaemonSet places a pod there
    dra: bool = False

    @classmethod
    def parse(cls, text: str) -> NodeSpec:
        """`gpu-a=H100-SXM5-80GB:8` or `cpu-1=none:0` (the demo command's form)."""
        name, _, rest = text.partition("=")
        model, _, count = (rest or "none:0").partition(":")
        return cls(name.strip(), model.strip() or "none", int(count or 0))


@dataclass(frozen=True)
class MigDeviceView:
    """One MIG device (GPU instance + compute instance) as NVML enumerates it."""

    uuid: str
    index: str  # "<gpu>:<j>", j the MIG enumeration index on that GPU
    profile: str  # "3g.40gb", or "1c.3g.40gb" for a smaller compute instance
    memory_mb: int
    gi_id: int = 0
    ci_id: int = 0


@dataclass(frozen=True)
class GpuView:
    """What NVML says of one GPU now."""

    index: int
    uuid: str
    name: str
    memory_mib: int
    mig_enabled: bool
    mig_devices: tuple[MigDeviceView, ...]
    processes: tuple[Process, ...] = ()
    memory_reserved: int = 0  # bytes
    pci_bus_id: str = ""


class SimNode:
    """One node: its spec, its NVML stand-in library and its GPUs."""

    def __init__(self, spec: NodeSpec, index: int) -> None:
        self.spec = spec
        self.index = index
        gpus = [_gpu(spec, i) for i in range(spec.count if spec.model_key != "none" else 0)]
        self.nvml = FakeLibNvml(gpus)
        self.state_file: GpuStateFile | None = None
        for gpu_index, profiles in spec.mig.items():
            self.set_mig(gpu_index, profiles)

    def share_state(self, path: Path) -> None:
        """From now on the GPUs' truth is `path`, shared with the node's other processes (the
        agent, nvidia-smi), as the driver is on a real node."""
        self.state_file = GpuStateFile(path)
        with self.state_file.locked(), self.nvml.lock:
            self.state_file.save(self.nvml)

    @contextmanager
    def _gpus_in_use(self, changing: bool) -> Iterator[None]:
        if self.state_file is None:
            with self.nvml.lock:
                yield
            return
        with self.state_file.locked(), self.nvml.lock:
            self.state_file.refresh(self.nvml)
            yield
            if changing:
                self.state_file.save(self.nvml)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def gpus(self) -> list[Gpu]:
        return self.nvml.gpus

    @property
    def address(self) -> str:
        return f"10.0.{self.index // 250}.{self.index % 250 + 10}"

    def node_object(self) -> Obj:
        labels = dict(self.spec.labels)
        if self.gpus:
            # NFD's PCI label and the operator/NFD rule label every GPU node carries.
            labels.setdefault(NFD_NVIDIA_PCI, "true")
            labels.setdefault("nvidia.com/gpu.present", "true")
        if self.spec.dra:
            labels.setdefault(DEPLOY_DEVICE_PLUGIN, "false")
        obj = sample_node(self.name, labels=labels)
        taints = [dict(t) for t in self.spec.taints]
        if self.spec.gpu_taint:
            taints.append(dict(GPU_TAINT))
        if taints:
            obj["spec"]["taints"] = taints
        obj["status"]["addresses"] = [
            {"type": "InternalIP", "address": self.address},
            {"type": "Hostname", "address": self.name},
        ]
        obj["status"]["nodeInfo"]["machineID"] = uuid.uuid5(_UUIDS, self.name).hex
        obj["status"]["nodeInfo"]["systemUUID"] = str(uuid.uuid5(_UUIDS, "sys/" + self.name))
        return obj

    # ---- MIG ---------------------------------------------------------------------------

    def set_mig(self, gpu_index: int, profiles: Sequence[str] | None) -> None:
        """Enable MIG with these MIG devices on one GPU, or disable it (None).

        Goes through the `Gpu` object as mig-parted would through NVML: mode change (with
        the reset Ampere needs), then one GPU instance and one compute instance per profile
        ("3g.40gb", or "1c.3g.40gb" for a 1-slice compute instance in a 3g GPU instance).
        The device plugin sees the change only when it restarts (docs/upstream-facts.md P3.3).
        """
        with self._gpus_in_use(changing=True):
            gpu = self.gpus[gpu_index]
            _clear(gpu)
            mode = codes.MIG_DISABLE if profiles is None else codes.MIG_ENABLE
            code, activation = gpu.set_mig_mode(mode)
            if code != codes.SUCCESS:
                raise ValueError(f"GPU {gpu_index} ({gpu.name}) cannot change MIG mode: {code}")
            if activation == codes.RESET_REQUIRED and gpu.reset() != codes.SUCCESS:
                raise ValueError(f"GPU {gpu_index} could not be reset")
            for profile in profiles or ():
                _create(gpu, profile)

    def raise_xid(self, gpu_index: int, xid: int) -> None:
        """An Xid error on one GPU, seen by every process of the node through its library."""
        with self._gpus_in_use(changing=True):
            self.gpus[gpu_index].raise_xid(xid)

    # ---- compute processes ------------------------------------------------------------

    def locate(self, device_uuid: str) -> tuple[int, tuple[int, int] | None] | None:
        """(GPU index, (GPU instance ID, compute instance ID) or None for the whole GPU) of a
        GPU or MIG device UUID on this node, or None."""
        with self._gpus_in_use(changing=False):
            for gpu in self.gpus:
                if gpu.uuid == device_uuid:
                    return gpu.index, None
                for gi, ci in gpu.mig.mig_devices():
                    if ci.uuid == device_uuid:
                        return gpu.index, (gi.id, ci.id)
        return None

    def start_process(
        self,
        gpu_index: int,
        pid: int,
        used_bytes: int,
        mig_device: tuple[int, int] | None = None,
        sm_percent: int | None = None,
    ) -> None:
        """A compute process appears on a GPU (in a MIG device): every process on the node
        (the agent, nvidia-smi) sees it in NVML from now on."""
        with self._gpus_in_use(changing=True):
            gpu = self.gpus[gpu_index]
            if mig_device is not None:
                gi = gpu.mig.gpu_instances.get(mig_device[0])
                if gi is None or mig_device[1] not in gi.compute_instances:
                    raise ValueError(f"GPU {gpu_index} of {self.name}: no MIG device {mig_device}")
            gi_id, ci_id = mig_device or (None, None)
            gpu.processes.append(Process(pid, used_bytes, gi_id, ci_id, sm_percent))

    def end_processes(self, pids: set[int]) -> None:
        with self._gpus_in_use(changing=True):
            for gpu in self.gpus:
                gpu.processes = [p for p in gpu.processes if p.pid not in pids]

    def gpu_views(self) -> tuple[GpuView, ...]:
        with self._gpus_in_use(changing=False):
            return tuple(_view(gpu) for gpu in self.gpus)


def _gpu(spec: NodeSpec, index: int) -> Gpu:
    # Gpu.of derives the UUID from model and index; two nodes must not share a UUID.
    unique = uuid.uuid5(_UUIDS, f"{spec.name}/{spec.model_key}/{index}")
    return Gpu.of(spec.model_key, index, uuid=f"GPU-{unique}")


def _clear(gpu: Gpu) -> None:
    for gi, ci in gpu.mig.mig_devices():
        gpu.destroy_compute_instance(gi, ci)
    for gi in list(gpu.mig.gpu_instances.values()):
        gpu.destroy_gpu_instance(gi)


def _create(gpu: Gpu, profile: str) -> None:
    parts = profile.split(".", 1)
    ci_slices = 0
    gi_name = profile
    if parts[0].endswith("c") and parts[0][:-1].isdigit():
        ci_slices, gi_name = int(parts[0][:-1]), parts[1]
    gi_profile = next((p for p in gpu.profiles if p.name == gi_name), None)
    if gi_profile is None:
        raise ValueError(f"GPU {gpu.index} ({gpu.name}) has no MIG profile {gi_name!r}")
    code, gi = gpu.mig.create_gpu_instance(gi_profile, None)
    if code != codes.SUCCESS or gi is None:
        raise ValueError(f"no room for {profile} on GPU {gpu.index}: NVML code {code}")
    wanted = ci_slices or gi_profile.slice_count
    ci_profile = next(p for p in compute_profiles(gi_profile) if p.slice_count == wanted)
    code, _ = gpu.mig.create_compute_instance(gi, ci_profile, None)
    if code != codes.SUCCESS:
        raise ValueError(f"cannot create compute instance {profile} on GPU {gpu.index}: {code}")


def _view(gpu: Gpu) -> GpuView:
    devices = []
    if gpu.mig_enabled:
        for j, (gi, ci) in enumerate(gpu.mig.mig_devices()):
            profile = gi.profile
            devices.append(
                MigDeviceView(
                    uuid=ci.uuid,
                    index=f"{gpu.index}:{j}",
                    profile=mig_device_profile(profile, ci.profile.slice_count),
                    memory_mb=profile.memory_size_mb,
                    gi_id=gi.id,
                    ci_id=ci.id,
                )
            )
    return GpuView(
        index=gpu.index,
        uuid=gpu.uuid,
        name=gpu.name,
        memory_mib=gpu.memory_total // MIB,
        mig_enabled=gpu.mig_enabled,
        mig_devices=tuple(devices),
        processes=tuple(gpu.processes),
        memory_reserved=gpu.memory_reserved,
        pci_bus_id=gpu.pci_bus_id,
    )
