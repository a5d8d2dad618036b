"""`kubectl gpu top`'s rows: node → physical GPU → device → pod/container, with use and limit.

Owns joining one node's `NodeUsage` (the agent's processes, each with the pod its cgroup
names, and the devices kubelet handed out) with the pods the API server knows (UID → name,
container ID → container name) into `TopRow`s: per GPU one row with the GPU's own totals,
one row per (pod, container, device) with the memory and SM % of that container's own
processes, one per process in no pod, and a row for a pod that holds a device on the GPU
but runs nothing on it (memory 0: what `--idle` looks for). A device-level figure is never
put on a pod's row (`copied` marks the rows of sources that only have those). Pure:
standard library only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from kubectl_gpu.usage import isolation
from kubectl_gpu.usage.document import Attributed, Held, NodeUsage
from kubectl_gpu.usage.isolation import Limit
from kubectl_gpu.usage.readings import SM_MIG, GpuReading, MigReading

GPU, POD, NO_POD = "gpu", "pod", "no-pod"
NOT_ALLOCATED = "runs on a GPU kubelet did not give its pod"
NO_PROCESS = "holds the device, runs nothing on it"


@dataclasses.dataclass(frozen=True)
class PodInfo:
    """A pod as the API server knows it: UID, name, and its containers by runtime ID."""

    uid: str
    namespace: str
    name: str
    containers: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class TopRow:
    """One row of `top` (`-o json`: `to_dict`, docs/top.md)."""

    node: str
    gpu_index: int | None
    gpu_uuid: str
    model: str | None
    kind: str  # GPU, POD or NO_POD
    device: str  # `gpu`, `::2`, `mig 1g.10gb`, a DRA device name; "" on a GPU row
    device_id: str | None
    namespace: str | None = None
    pod: str | None = None
    pod_uid: str | None = None
    container: str | None = None
    pids: tuple[int, ...] = ()
    memory_used: int | None = None
    memory_total: int | None = None
    sm_percent: int | None = None
    sm_unavailable: str | None = None
    limit: Limit | None = None
    note: str | None = None
    copied: bool = False  # the figures are the device's, copied onto this pod (dcgm-exporter)
    # for `--tree` only (not in `-o json`): how many replicas the device's GPU is cut into,
    # the MIG device's GPU instance ID and placement start, and, on a GPU row, the MIG devices
    # no one uses
    replicas: int | None = None
    mig: MigReading | None = None
    free_migs: tuple[MigReading, ...] = ()

    @property
    def gpu_instance(self) -> int | None:
        """The GPU instance ID of the MIG device the row is on (None off MIG)."""
        return self.mig.gpu_instance if self.mig is not None else None

    @property
    def pod_ref(self) -> str | None:
        """`namespace/name`, the UID when the pod is not known by name."""
        if self.pod is not None:
            return f"{self.namespace}/{self.pod}"
        return self.pod_uid

    def to_dict(self) -> dict[str, object]:
        """The row's JSON form."""
        limit = self.limit
        return {
            "node": self.node,
            "gpu": self.gpu_index,
            "gpuUUID": self.gpu_uuid,
            "model": self.model,
            "kind": self.kind,
            "device": self.device,
            "deviceID": self.device_id,
            "namespace": self.namespace,
            "pod": self.pod,
            "podUID": self.pod_uid,
            "container": self.container,
            "pids": list(self.pids),
            "memoryUsedBytes": self.memory_used,
            "memoryTotalBytes": self.memory_total,
            "smPercent": self.sm_percent,
            "smUnavailable": self.sm_unavailable,
            "isolation": None if limit is None else limit.form,
            "memoryLimitBytes": None if limit is None else limit.memory,
            "threadPercent": None if limit is None else limit.thread_percent,
            "neighbours": [] if limit is None else list(limit.neighbours),
            "note": self.note,
            "copied": self.copied,
        }


def make(usage: NodeUsage, pods: Iterable[PodInfo], strategy: str | None) -> list[TopRow]:
    """Every row of one node, GPU by GPU (`strategy`: the node's sharing-strategy label)."""
    known = _Pods(pods)
    rows: list[TopRow] = []
    for gpu in sorted(usage.gpus, key=lambda g: g.index):
        rows += _Gpu(usage, gpu, known, strategy).rows()
    return rows


class _Pods:
    def __init__(self, pods: Iterable[PodInfo]) -> None:
        self.by_uid = {p.uid: p for p in pods}
        self.by_name = {(p.namespace, p.name): p for p in self.by_uid.values()}

    def of_held(self, h: Held) -> PodInfo | None:
        return self.by_uid.get(h.pod_uid or "") or self.by_name.get(
            (h.namespace or "", h.pod or "")
        )


@dataclasses.dataclass
class _Use:
    """What one (pod, container, device) uses: processes, memory, SM."""

    uid: str
    container_id: str | None
    held: Held | None
    mig: MigReading | None
    pids: list[int] = dataclasses.field(default_factory=list)
    memory: int | None = 0
    sm: int | None = None
    sm_unavailable: str | None = None


class _Gpu:
    """The rows of one physical GPU."""

    def __init__(self, usage: NodeUsage, gpu: GpuReading, pods: _Pods, strategy: str | None):
        self.usage, self.gpu, self.pods, self.strategy = usage, gpu, pods, strategy
        self.migs = {(m.gpu_instance, m.compute_instance): m for m in gpu.mig_devices}
        self.mig_by_uuid = {m.uuid: m for m in gpu.mig_devices}
        self.held = [
            h for h in usage.held if h.gpu_uuid == gpu.uuid or h.mig_uuid in self.mig_by_uuid
        ]
        self.processes = usage.processes_on(gpu.uuid)

    def rows(self) -> list[TopRow]:
        uses: dict[tuple[str, str | None, str], _Use] = {}
        strays: list[Attributed] = []
        for a in self.processes:
            if a.pod_uid is None:
                strays.append(a)
                continue
            mig = self._mig_of(a)
            held = self._holding(a, mig)
            key = (a.pod_uid, a.container_id, held.device_id if held else "")
            use = uses.setdefault(key, _Use(a.pod_uid, a.container_id, held, mig))
            _add(use, a)
        for h in self.held:  # holders with nothing running
            pod = self.pods.of_held(h)
            uid = h.pod_uid or (pod.uid if pod else None) or f"{h.namespace}/{h.pod}"
            if not any(
                u.held is not None and u.held.device_id == h.device_id for u in uses.values()
            ):
                mig = self.mig_by_uuid.get(h.mig_uuid or "")
                uses[(uid, None, h.device_id)] = _Use(uid, None, h, mig, [], 0, None, None)
        pod_rows = [self._pod_row(u, uses.values(), strays) for u in uses.values()]
        stray_rows = [self._stray_row(a) for a in strays]
        return [self._gpu_row(), *pod_rows, *stray_rows]

    def _mig_of(self, a: Attributed) -> MigReading | None:
        return self.migs.get((a.process.gpu_instance, a.process.compute_instance))

    def _holding(self, a: Attributed, mig: MigReading | None) -> Held | None:
        """The device of its pod a process runs on: on this GPU (its MIG instance), the one
        its own container holds where the pod's containers hold several; else a DRA device
        of the pod (kubelet does not say which GPU a claim's device is)."""
        uid = a.pod_uid
        pod = self.pods.by_uid.get(uid or "")
        mine = [
            h
            for h in self.usage.held
            if h.pod_uid == uid
            or (pod is not None and (h.namespace, h.pod) == (pod.namespace, pod.name))
        ]
        here = [h for h in mine if h in self.held]
        if mig is not None:
            here = [h for h in here if h.mig_uuid == mig.uuid] or here
        container = pod.containers.get(a.container_id or "") if pod else None
        here = [h for h in here if h.container == container] or here
        dra = [h for h in mine if h.source == "dra" and h.gpu_uuid is None and h.mig_uuid is None]
        found = here or dra
        return found[0] if found else None

    def _gpu_row(self) -> TopRow:
        g = self.gpu
        return TopRow(
            self.usage.node,
            g.index,
            g.uuid,
            g.model,
            GPU,
            "",
            None,
            pids=tuple(a.process.pid for a in self.processes),
            memory_used=g.memory_used,
            memory_total=g.memory_total,
            sm_percent=g.sm_percent,
            sm_unavailable=g.sm_unavailable,
            free_migs=tuple(m for m in g.mig_devices if m.uuid not in self._used_migs()),
        )

    def _used_migs(self) -> set[str]:
        """The MIG devices a pod holds or a process runs on."""
        used = {h.mig_uuid for h in self.held if h.mig_uuid}
        used |= {m.uuid for a in self.processes if (m := self._mig_of(a)) is not None}
        return {u for u in used if u}

    def _pod_row(self, use: _Use, uses: Iterable[_Use], strays: Sequence[Attributed]) -> TopRow:
        pod = self.pods.by_uid.get(use.uid)
        if pod is None and use.held is not None:
            pod = self.pods.of_held(use.held)
        container = pod.containers.get(use.container_id or "") if pod else None
        if container is None and use.held is not None:
            container = use.held.container
        neighbours = self._neighbours(use, uses, strays)
        limit = self._limit(use, neighbours)
        note = None if use.held is not None else NOT_ALLOCATED
        if use.held is not None and not use.pids:
            note = NO_PROCESS
        return TopRow(
            self.usage.node,
            self.gpu.index,
            self.gpu.uuid,
            self.gpu.model,
            POD,
            _device_label(use.held, use.mig),
            use.held.device_id if use.held else None,
            namespace=pod.namespace if pod else (use.held.namespace if use.held else None),
            pod=pod.name if pod else (use.held.pod if use.held else None),
            pod_uid=use.uid if "/" not in use.uid else None,
            container=container,
            pids=tuple(sorted(use.pids)),
            memory_used=use.memory,
            memory_total=use.mig.memory_total if use.mig else None,
            sm_percent=use.sm,
            sm_unavailable=use.sm_unavailable,
            limit=limit,
            note=note,
            replicas=use.held.replicas if use.held else None,
            mig=use.mig,
        )

    def _limit(self, use: _Use, neighbours: tuple[str, ...]) -> Limit:
        held = use.held
        mig = use.mig
        if held is not None and held.mig_uuid is not None:
            mig = self.mig_by_uuid.get(held.mig_uuid, mig)
        return isolation.of(
            mig_memory=mig.memory_total if mig is not None else None,
            replicas=held.replicas if held is not None else None,
            strategy=self.strategy,
            gpu_memory=self.gpu.memory_total,
            neighbours=neighbours,
        )

    def _neighbours(
        self, use: _Use, uses: Iterable[_Use], strays: Sequence[Attributed]
    ) -> tuple[str, ...]:
        """The other pods on the same physical device (the GPU, or the MIG instance), and
        the processes in no pod there: who could take this pod's memory."""
        mine = _physical(use)
        others = []
        for other in uses:
            if other.uid == use.uid or _physical(other) != mine:
                continue
            others.append(self._name(other))
        for a in strays:
            mig = self._mig_of(a)
            if (mig.uuid if mig else None) == (mine if mine != "gpu" else None):
                others.append(f"pid {a.process.pid} (no pod)")
        return tuple(dict.fromkeys(others))

    def _name(self, use: _Use) -> str:
        pod = self.pods.by_uid.get(use.uid)
        if pod is None and use.held is not None:
            pod = self.pods.of_held(use.held)
            if pod is None and use.held.pod is not None:
                return f"{use.held.namespace}/{use.held.pod}"
        return f"{pod.namespace}/{pod.name}" if pod else use.uid

    def _stray_row(self, a: Attributed) -> TopRow:
        mig = self._mig_of(a)
        return TopRow(
            self.usage.node,
            self.gpu.index,
            self.gpu.uuid,
            self.gpu.model,
            NO_POD,
            _device_label(None, mig),
            None,
            pids=(a.process.pid,),
            memory_used=a.process.used_memory,
            sm_percent=a.process.sm_percent,
            sm_unavailable=a.process.sm_unavailable,
            note="in no pod: a node process or one its pod left behind",
            mig=mig,
        )


def _physical(use: _Use) -> str:
    """The physical device a use is on: a MIG instance's UUID, else the whole GPU."""
    if use.held is not None and use.held.mig_uuid is not None:
        return use.held.mig_uuid
    return use.mig.uuid if use.mig is not None else "gpu"


def _add(use: _Use, a: Attributed) -> None:
    p = a.process
    use.pids.append(p.pid)
    use.memory = None if use.memory is None or p.used_memory is None else use.memory + p.used_memory
    if p.sm_percent is not None:
        use.sm = (use.sm or 0) + p.sm_percent
    elif use.sm is None:
        use.sm_unavailable = use.sm_unavailable or p.sm_unavailable


def _device_label(held: Held | None, mig: MigReading | None) -> str:
    if held is not None and held.source == "dra":
        return held.device_id.rsplit("/", 1)[-1]
    if mig is not None:
        return f"mig {mig.profile or '?'}"
    if held is None:
        return "-"
    if held.replica is not None:
        return f"::{held.replica}"
    return "gpu"


def sm_text(row: TopRow) -> str:
    """The SM cell: `35%`, or why there is none (`n/a MIG`, `no samples`)."""
    if row.sm_percent is not None:
        return f"{row.sm_percent}%"
    if row.sm_unavailable == SM_MIG:
        return "n/a MIG"
    if row.sm_unavailable:
        return row.sm_unavailable.replace("-", " ")
    return "-"
