"""The node map: allocations × pods × physical GPUs → rows, and what the sources disagree on.

Owns joining what kubelet's checkpoint and PodResources say about one node with a pod list
(the only link between the checkpoint's pod UIDs and PodResources' names, reference §0.2)
and an optional NVML inventory, into one `Row` per advertised device ID held by a container
(or free), each resolved to its physical GPU and MIG device as far as the inputs allow.
Offline, without an inventory, rows still carry the UUID parsed from the ID and a null index
and model. Also owns the findings about disagreements: stale checkpoint entries, unhealthy
devices, an `AllocResp` that injected other devices than kubelet recorded, IDs of no known
form, devices not on the node's GPUs, devices held by two pods.
Must not read anything (the adapters do) or render (the CLI does). Pure: standard library only.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Sequence

from kubectl_gpu import findings
from kubectl_gpu.findings import Finding
from kubectl_gpu.gpumap import deviceid
from kubectl_gpu.gpumap.allocations import (
    Allocation,
    Gpu,
    MigDevice,
    PodRef,
    RegisteredDevices,
    Source,
)
from kubectl_gpu.gpumap.deviceid import DeviceId, Kind
from kubectl_gpu.mig.profiles import RESOURCE_PREFIX as MIG_RESOURCE_PREFIX

SHARED_SUFFIX = ".shared"  # NVIDIA's renameByDefault: nvidia.com/mig-1g.10gb.shared
_STALE_HINT = (
    "kubelet drops such entries at its next allocation or PodResources List; the devices are free"
)


@dataclasses.dataclass(frozen=True)
class NodeSources:
    """Everything read on one node. `podresources` is None when PodResources was not queried
    (offline), `registered` when the checkpoint could not be read, `allocatable` when
    GetAllocatableResources was not called."""

    node: str | None = None
    checkpoint: tuple[Allocation, ...] = ()
    registered: RegisteredDevices | None = None
    podresources: tuple[Allocation, ...] | None = None
    allocatable: RegisteredDevices | None = None


@dataclasses.dataclass
class Row:
    """One advertised device ID, its physical GPU (and MIG device), and who holds it.

    `to_dict` is the `-o json` contract (schemas/map-rows.v1.json); absent values are None.
    Not frozen, though nothing changes a row once made: a frozen dataclass of 20 fields costs
    2.5 µs more to build, a quarter of a second for 100,000 rows.
    """

    node: str | None
    gpu_index: int | None
    gpu_uuid: str | None
    gpu_model: str | None
    mig_uuid: str | None
    mig_profile: str | None
    gpu_instance: int | None
    compute_instance: int | None
    device_id: str
    resource: str
    replica: int | None
    namespace: str | None
    pod: str | None
    pod_uid: str | None
    container: str | None
    source: str
    # DRA only: the share of a device several claims hold (consumable capacity), the sharing
    # config in effect, and what the allocated partitions take of the physical GPU's counters.
    share_id: str | None = None
    consumed: str | None = None  # consumedCapacity of that share: `memory=10Gi`
    sharing: str | None = None
    counters: str | None = None

    @property
    def plane(self) -> str:
        """Which plane handed the device out: `dra` or `device-plugin`."""
        return "dra" if self.source == "dra" else "device-plugin"

    def to_dict(self) -> dict[str, object]:
        """The row as a plain dict, keys in schema order.

        Every field is a plain value, so a shallow read gives what `asdict` would at a tenth
        of its cost (100,000 rows).
        """
        return {**{name: getattr(self, name) for name in _ROW_FIELDS}, "plane": self.plane}


_ROW_FIELDS = tuple(f.name for f in dataclasses.fields(Row))


@dataclasses.dataclass(frozen=True)
class NodeMap:
    """The rows for held devices, the rows for free ones, and the findings."""

    rows: tuple[Row, ...]
    free: tuple[Row, ...]
    findings: tuple[Finding, ...]


def make(
    sources: NodeSources, pods: Sequence[PodRef] = (), inventory: Sequence[Gpu] | None = None
) -> NodeMap:
    """Join one node's sources into its map; `inventory` None means NVML was not read."""
    known = _Pods(pods)
    held, problems = _merge(sources, known)
    node = sources.node or known.node_of(held)
    gpus = _Inventory(inventory)
    ids = _Parsed()
    rows = _sorted((_row(node, a, ids[i], gpus) for a in held for i in a.device_ids), ids)
    free = _sorted(_free_rows(node, sources, rows, gpus), ids)
    problems += _unhealthy(sources, held)
    problems += [f for a in held for f in _disagreement(a)]
    problems += _unresolved(rows, gpus, ids) + _held_twice(rows)
    return NodeMap(tuple(rows), tuple(free), tuple(dict.fromkeys(problems)))


class _Parsed(dict[str, DeviceId]):
    """Each device ID parsed once per map: rows, their order and the findings all need it
    (parsed three times, 100,000 IDs took 1.5 s)."""

    def __missing__(self, raw: str) -> DeviceId:
        found = self[raw] = deviceid.parse(raw)
        return found


# --- pods: filling in the half of a pod's identity a source lacks --------------------------------


class _Pods:
    def __init__(self, pods: Sequence[PodRef]) -> None:
        self.given = bool(pods)
        self.by_uid = {p.uid: p for p in pods}
        self.by_name = {(p.namespace, p.name): p for p in pods}

    def named(self, a: Allocation) -> Allocation:
        pod = self.by_uid.get(a.pod_uid or "") or self.by_name.get((a.namespace or "", a.pod or ""))
        if pod is None:
            return a
        return dataclasses.replace(a, pod_uid=pod.uid, namespace=pod.namespace, pod=pod.name)

    def node_of(self, held: Iterable[Allocation]) -> str | None:
        nodes = {self.by_uid[a.pod_uid].node for a in held if a.pod_uid in self.by_uid}
        nodes.discard(None)
        return nodes.pop() if len(nodes) == 1 else None


def _merge(sources: NodeSources, pods: _Pods) -> tuple[list[Allocation], list[Finding]]:
    """Offline, the checkpoint is the map. With PodResources, kubelet's live view is, and the
    checkpoint only adds pod UIDs and AllocResp to the allocations it agrees with."""
    entries = [pods.named(a) for a in sources.checkpoint]
    if sources.podresources is None:
        gone = [e for e in entries if pods.given and e.pod_uid not in pods.by_uid]
        return entries, [_stale(e, f"the pod list has no pod with UID {e.pod_uid}") for e in gone]
    live = [pods.named(a) for a in sources.podresources]
    # Only live allocations holding one of an entry's devices can match it: look those up
    # (comparing every entry with every live allocation made 100,000 of each take hours).
    holding: dict[tuple[str, str], list[int]] = {}
    for i, a in enumerate(live):
        for device_id in a.device_ids:
            holding.setdefault((a.resource, device_id), []).append(i)
    problems = []
    for entry in entries:
        near = sorted({i for d in entry.device_ids for i in holding.get((entry.resource, d), ())})
        same = next((i for i in near if _same_allocation(live[i], entry)), None)
        if same is not None:
            live[same] = _enriched(live[same], entry)
        elif not any(_shares_devices(live[i], entry) for i in near):  # else an init container's
            problems.append(_stale(entry, "kubelet's PodResources List no longer reports it"))
    return live, problems


def _shares_devices(live: Allocation, entry: Allocation) -> bool:
    same_pod = live.pod is None or entry.pod is None or _pod_key(live) == _pod_key(entry)
    overlap = set(live.device_ids) & set(entry.device_ids)
    return same_pod and live.resource == entry.resource and bool(overlap)


def _same_allocation(live: Allocation, entry: Allocation) -> bool:
    return live.container == entry.container and _shares_devices(live, entry)


def _enriched(live: Allocation, entry: Allocation) -> Allocation:
    return dataclasses.replace(
        live, pod_uid=live.pod_uid or entry.pod_uid, response=live.response or entry.response
    )


def _pod_key(a: Allocation) -> str:
    return f"{a.namespace}/{a.pod}" if a.pod is not None else str(a.pod_uid)


def _who(a: Allocation) -> str:
    return f"pod {_pod_key(a)} container {a.container}"


def _stale(entry: Allocation, reason: str) -> Finding:
    message = (
        f"kubelet's checkpoint gives {', '.join(entry.device_ids)} to {_who(entry)}, but {reason}"
    )
    return findings.warning((), "map.stale-checkpoint-entry", message, _STALE_HINT)


# --- resolving a device ID to its physical GPU ---------------------------------------------------


class _Inventory:
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


def _row(node: str | None, a: Allocation, device: DeviceId, gpus: _Inventory) -> Row:
    gpu, mig = gpus.locate(device)
    return Row(
        node=node,
        gpu_index=gpu.index if gpu else None,
        gpu_uuid=gpu.uuid if gpu else device.gpu_uuid,
        gpu_model=gpu.model if gpu else None,
        mig_uuid=mig.uuid if mig else device.mig_uuid,
        mig_profile=mig.profile if mig else _profile_of(a.resource, device),
        gpu_instance=mig.gi if mig else device.gi,
        compute_instance=mig.ci if mig else device.ci,
        device_id=device.raw,
        resource=a.resource,
        replica=device.replica,
        namespace=a.namespace,
        pod=a.pod,
        pod_uid=a.pod_uid,
        container=a.container,
        source=a.source.value,
    )


def _profile_of(resource: str, device: DeviceId) -> str | None:
    """The mixed strategy names the profile in the resource: nvidia.com/mig-1g.10gb[.shared]."""
    if not device.is_mig or not resource.startswith(MIG_RESOURCE_PREFIX):
        return None
    profile = resource[len(MIG_RESOURCE_PREFIX) :]
    return profile.removesuffix(SHARED_SUFFIX) or None


def _free_rows(
    node: str | None, sources: NodeSources, rows: Sequence[Row], gpus: _Inventory
) -> list[Row]:
    advertised = _healthy(sources)
    if advertised is None:
        return []
    held = {(r.resource, r.device_id) for r in rows}
    free = []
    for group in advertised.resources:
        nobody = Allocation(None, None, None, "", group.resource, (), advertised.source)
        for device in map(deviceid.parse, group.device_ids):
            if (group.resource, device.raw) not in held:
                free.append(dataclasses.replace(_row(node, nobody, device, gpus), container=None))
    return free


def _sorted(rows: Iterable[Row], ids: _Parsed) -> list[Row]:
    def key(r: Row) -> tuple[object, ...]:
        return (
            r.gpu_index is None,
            r.gpu_index or 0,
            r.gpu_uuid or "",
            r.mig_uuid or "",
            ids[r.device_id].physical,
            -1 if r.replica is None else r.replica,
            r.namespace or "",
            r.pod or r.pod_uid or "",
            r.container or "",
        )

    return sorted(rows, key=key)


# --- findings about disagreements ----------------------------------------------------------------


def _unhealthy(sources: NodeSources, held: Sequence[Allocation]) -> list[Finding]:
    """Registered devices are the healthy ones (reference §1.1, §3): a device registered in the
    checkpoint but not allocatable now, or held but not registered, has turned unhealthy."""
    problems = []
    healthy = _healthy(sources)
    if sources.allocatable is not None and sources.registered is not None:
        lost = sources.registered.all_ids() - sources.allocatable.all_ids()
        problems += [_lost(resource, i) for resource, i in sorted(lost)]
    if healthy is None:
        return problems
    # one set per resource, built once: per allocation it made 100,000 entries take 36 min
    registered = {r.resource: frozenset(r.device_ids) for r in healthy.resources}
    for a in held:
        if a.source is Source.DRA:
            continue
        ids = registered.get(a.resource, frozenset())
        problems += [_unhealthy_held(a, i, healthy) for i in a.device_ids if i not in ids]
    return problems


def _healthy(sources: NodeSources) -> RegisteredDevices | None:
    """What kubelet offers now if it was asked, else what it registered when it wrote the file."""
    return sources.allocatable if sources.allocatable is not None else sources.registered


def _lost(resource: str, device_id: str) -> Finding:
    message = (
        f"{device_id} ({resource}) was registered healthy in kubelet's checkpoint but is not "
        "allocatable now: it is unhealthy, or its device plugin stopped"
    )
    hint = "check the device plugin's logs and `nvidia-smi` on the node"
    return findings.warning((), "map.device-unhealthy", message, hint)


def _unhealthy_held(a: Allocation, device_id: str, healthy: RegisteredDevices) -> Finding:
    where = (
        "is not allocatable now"
        if healthy.source is Source.PODRESOURCES
        else f"was not among the healthy {a.resource} devices kubelet registered in its checkpoint"
    )
    message = f"{device_id} held by {_who(a)} {where}: the device is unhealthy or gone"
    hint = "check the device plugin's logs and `nvidia-smi` on the node"
    return findings.warning((), "map.device-unhealthy", message, hint)


def _disagreement(a: Allocation) -> list[Finding]:
    """NVIDIA's plugin injects the physical IDs (replica suffix removed) it was asked for; only
    UUID-form lists can be compared (an index list needs NVML)."""
    visible = a.visible_devices()
    if visible is None or any(deviceid.parse(v).kind is Kind.UNKNOWN for v in visible):
        return []
    recorded = {deviceid.parse(i).physical for i in a.device_ids}
    if set(visible) == recorded:
        return []
    message = (
        f"kubelet recorded {', '.join(sorted(recorded))} for {_who(a)}, but the device plugin's "
        f"AllocResp made {', '.join(visible)} visible"
    )
    hint = "the container may use another GPU than the map shows; restart the pod to reallocate"
    return [findings.warning((), "map.alloc-resp-disagrees", message, hint)]


def _unresolved(rows: Sequence[Row], gpus: _Inventory, ids: _Parsed) -> list[Finding]:
    problems = []
    for r in rows:
        kind = ids[r.device_id].kind
        if kind is Kind.UNKNOWN and r.source != Source.DRA.value:
            message = (
                f"{r.device_id} ({r.resource}) is not a device ID form kubectl-gpu knows "
                "(GPU-…, MIG-…, …::N, tegra, nvidia<N>): its GPU is not shown"
            )
            problems.append(findings.warning((), "map.unknown-device-id", message))
        elif kind is not Kind.UNKNOWN and gpus.known and not gpus.has_gpu(r.gpu_uuid):
            problems.append(_not_on_node(r))
    return problems


def _not_on_node(r: Row) -> Finding:
    message = f"{r.device_id} ({r.resource}) names no GPU or MIG device NVML reports on this node"
    hint = "the GPU was replaced or re-partitioned since kubelet recorded it; restart the pod"
    return findings.warning((), "map.device-not-on-node", message, hint)


def _held_twice(rows: Sequence[Row]) -> list[Finding]:
    dra = Source.DRA.value  # DRA shares a device between claims by design
    held = collections.Counter((r.resource, r.device_id) for r in rows if r.source != dra)
    twice = {key for key, count in held.items() if count > 1}
    holders: dict[tuple[str, str], dict[str, None]] = {}
    for r in rows:  # the pods of those only
        if twice and (r.resource, r.device_id) in twice and r.source != dra:
            holders.setdefault((r.resource, r.device_id), {})[_row_pod(r)] = None
    return [
        findings.warning(
            (),
            "map.device-held-twice",
            f"{device_id} ({resource}) is held by {' and '.join(pods)}",
            "one of the allocations is stale; the checkpoint may predate a reboot",
        )
        for (resource, device_id), pods in holders.items()
        if len(pods) > 1
    ]


def _row_pod(r: Row) -> str:
    return f"pod {r.namespace}/{r.pod}" if r.pod is not None else f"pod {r.pod_uid}"
