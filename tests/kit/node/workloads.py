"""The compute processes of running GPU pods, as a node's container runtime and driver show them.

When a pod that holds GPU devices runs on a simulated node (device-plugin IDs — whole GPUs,
time-slice or MPS replicas `<UUID>::<n>`, MIG devices — or a DRA claim allocated from the node's
pool), each of its containers that holds a device gets one compute process per physical GPU or
MIG device: a host-like PID in the node's NVML state (nvmlDeviceGetComputeRunningProcesses, with
its GPU and compute instance on MIG, and an SM % sample for nvmlDeviceGetProcessUtilization) and
`<node proc root>/<PID>/cgroup` naming the pod's kubelet cgroup (cgroups.py). Both go when the
pod stops. How much a process uses is the pod's to say, through test-only annotations:

- `sim.kubectl-gpu.io/gpu-memory`: GPU memory of each of the pod's processes, a quantity
  (`12Gi`, `512Mi`; default 1Gi);
- `sim.kubectl-gpu.io/sm-percent`: its SM utilization, 0-100 (default: no sample, as NVML has
  none for a process that launched no kernel lately).

Also processes that belong to no pod (`stray`: a system service, or a leaked process whose pod is
gone). Owns `GpuWorkloads` (called by the simulated kubelet as pods start and stop) and
`GpuProcess`. Must not decide admission or allocation (allocation.py), or write the store.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tests.kit.kube import ApiError
from tests.kit.node import cgroups
from tests.kit.node.allocation import Allocation
from tests.kit.node.matching import quantity
from tests.kit.node.nodes import SimNode

Obj = dict[str, Any]
MEMORY_ANNOTATION = "sim.kubectl-gpu.io/gpu-memory"
SM_ANNOTATION = "sim.kubectl-gpu.io/sm-percent"
DEFAULT_MEMORY = 1 << 30
FIRST_PID = 41_000  # what a busy host's PIDs look like
DRA_DRIVER = "gpu.nvidia.com"


class Reads(Protocol):
    def get(self, resource: str, name: str, namespace: str = "") -> Obj: ...
    def list(self, resource: str, namespace: str = "") -> list[Obj]: ...


@dataclass(frozen=True)
class GpuProcess:
    """One compute process on a simulated node."""

    node: str
    pid: int
    gpu_index: int
    mig_device: tuple[int, int] | None  # (GPU instance ID, compute instance ID)
    used_bytes: int
    sm_percent: int | None
    cgroup: str  # the text of /proc/PID/cgroup
    pod_uid: str | None = None  # None: a process of no pod
    namespace: str = ""
    pod: str = ""
    container: str = ""


class GpuWorkloads:
    """Every GPU pod's processes on every simulated node."""

    def __init__(
        self, nodes: Mapping[str, SimNode], proc_roots: Mapping[str, Path], store: Reads
    ) -> None:
        self.nodes = nodes
        self.proc_roots = dict(proc_roots)  # node -> the host's /proc as the node's agent reads it
        self.store = store
        self._lock = threading.Lock()
        self._by_pod: dict[str, list[GpuProcess]] = {}
        self._stray: dict[int, GpuProcess] = {}
        self._next_pid: dict[str, int] = {}

    def driver(self, node: str) -> str:
        return cgroups.driver_of(self.nodes[node].index)

    # ---- the kubelet's hooks (on the loop's thread) ---------------------------------------

    def started(self, node: str, pod: Obj, allocations: Sequence[Allocation]) -> None:
        sim = self.nodes.get(node)
        if sim is None or not sim.gpus:
            return
        uid = str(pod["metadata"]["uid"])
        memory, sm = _usage(pod)
        made: list[GpuProcess] = []
        for container, device in self._devices(sim, pod, allocations):
            gpu_index, mig = device
            pid = self._pid(node)
            process = GpuProcess(
                node, pid, gpu_index, mig, memory, sm, cgroups.of_container(
                    self.driver(node), pod, container
                ),
                uid, str(pod["metadata"].get("namespace") or ""), str(pod["metadata"]["name"]),
                container,
            )  # fmt: skip
            self._appear(sim, process)
            made.append(process)
        if made:
            with self._lock:
                self._by_pod[uid] = made

    def stopped(self, uid: str) -> None:
        with self._lock:
            gone = self._by_pod.pop(uid, [])
        self._disappear(gone)

    # ---- test handles ---------------------------------------------------------------------

    def add_stray(
        self,
        node: str,
        gpu_index: int,
        used_bytes: int,
        *,
        mig_device: tuple[int, int] | None = None,
        sm_percent: int | None = None,
        cgroup_path: str = "/system.slice/gpu-burn.service",
    ) -> GpuProcess:
        """A process of no pod (a system service by default; give the cgroup path of a pod
        that is gone for a leaked one)."""
        text = cgroups.proc_cgroup(self.driver(node), cgroup_path)
        process = GpuProcess(
            node, self._pid(node), gpu_index, mig_device, used_bytes, sm_percent, text
        )
        self._appear(self.nodes[node], process)
        with self._lock:
            self._stray[process.pid] = process
        return process

    def end(self, pid: int) -> None:
        """End a stray process."""
        with self._lock:
            gone = self._stray.pop(pid, None)
        self._disappear([gone] if gone else [])

    def processes(self, node: str) -> list[GpuProcess]:
        with self._lock:
            every = [p for ps in self._by_pod.values() for p in ps] + list(self._stray.values())
        return sorted((p for p in every if p.node == node), key=lambda p: p.pid)

    def clear(self) -> None:
        """Remove every process file (the cluster stops; NVML's state goes with the node)."""
        for root in self.proc_roots.values():
            shutil.rmtree(root, ignore_errors=True)

    # ---- on the node ----------------------------------------------------------------------

    def _appear(self, sim: SimNode, process: GpuProcess) -> None:
        root = self.proc_roots.get(sim.name)
        if root is not None:
            directory = root / str(process.pid)
            directory.mkdir(parents=True, exist_ok=True)
            (directory / "cgroup").write_text(process.cgroup)
        sim.start_process(
            process.gpu_index, process.pid, process.used_bytes, process.mig_device,
            process.sm_percent,
        )  # fmt: skip

    def _disappear(self, processes: Sequence[GpuProcess]) -> None:
        by_node: dict[str, set[int]] = {}
        for process in processes:
            by_node.setdefault(process.node, set()).add(process.pid)
            root = self.proc_roots.get(process.node)
            if root is not None:
                shutil.rmtree(root / str(process.pid), ignore_errors=True)
        for node, pids in by_node.items():
            if node in self.nodes:
                self.nodes[node].end_processes(pids)

    def _pid(self, node: str) -> int:
        with self._lock:
            pid = self._next_pid.get(node, FIRST_PID + 7 * self.nodes[node].index)
            self._next_pid[node] = pid + 13
            return pid

    # ---- which devices -------------------------------------------------------------------

    def _devices(
        self, sim: SimNode, pod: Obj, allocations: Sequence[Allocation]
    ) -> list[tuple[str, tuple[int, tuple[int, int] | None]]]:
        """(container, (GPU index, MIG device or None)) once per physical device."""
        found: list[tuple[str, tuple[int, tuple[int, int] | None]]] = []
        for allocation in allocations:
            for device_id in allocation.device_ids:
                where = sim.locate(device_id.split("::", 1)[0])
                if where is not None and (allocation.container, where) not in found:
                    found.append((allocation.container, where))
        for container, device_uuid in self._claimed(sim, pod):
            where = sim.locate(device_uuid)
            if where is not None and (container, where) not in found:
                found.append((container, where))
        return found

    def _claimed(self, sim: SimNode, pod: Obj) -> list[tuple[str, str]]:
        """(container, device UUID) of the pod's DRA claims allocated from this node's pool."""
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        claims = spec.get("resourceClaims") or []
        if not claims:
            return []
        generated = {
            s.get("name"): s.get("resourceClaimName")
            for s in status.get("resourceClaimStatuses") or []
        }
        namespace = str(pod["metadata"].get("namespace") or "default")
        containers = spec.get("containers") or []
        found = []
        for claim in claims:
            name = claim.get("resourceClaimName") or generated.get(claim.get("name"))
            if not name:
                continue
            try:
                obj = self.store.get("resourceclaims", str(name), namespace)
            except ApiError:
                continue
            results = ((obj.get("status") or {}).get("allocation") or {}).get("devices") or {}
            users = [
                c["name"]
                for c in containers
                if any(
                    r.get("name") == claim.get("name")
                    for r in (c.get("resources") or {}).get("claims") or []
                )
            ] or [c["name"] for c in containers[:1]]
            for result in results.get("results") or []:
                if result.get("driver") != DRA_DRIVER or result.get("pool") != sim.name:
                    continue
                device_uuid = self._slice_uuid(sim.name, str(result.get("device")))
                found += [(user, device_uuid) for user in users if device_uuid]
        return found

    def _slice_uuid(self, node: str, device: str) -> str | None:
        """The `uuid` attribute the driver published for `device` in the node's pool."""
        try:
            slices = self.store.list("resourceslices")
        except ApiError:
            return None
        for piece in slices:
            spec = piece.get("spec") or {}
            if spec.get("driver") != DRA_DRIVER or (spec.get("pool") or {}).get("name") != node:
                continue
            for item in spec.get("devices") or []:
                if item.get("name") == device:
                    attributes = item.get("attributes") or (item.get("basic") or {}).get(
                        "attributes"
                    )
                    value = (attributes or {}).get("uuid") or {}
                    return str(value.get("string")) if value.get("string") else None
        return None


def _usage(pod: Obj) -> tuple[int, int | None]:
    """(bytes, SM %) each of the pod's GPU processes uses, from its annotations."""
    notes = pod["metadata"].get("annotations") or {}
    memory = quantity(notes[MEMORY_ANNOTATION]) if MEMORY_ANNOTATION in notes else DEFAULT_MEMORY
    sm: int | None = None
    if SM_ANNOTATION in notes:
        try:
            sm = max(0, min(100, int(str(notes[SM_ANNOTATION]).strip())))
        except ValueError:
            sm = None
    return memory, sm
