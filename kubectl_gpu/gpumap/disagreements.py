"""What a node's sources disagree on, as findings: stale checkpoint entries, unhealthy
devices, an `AllocResp` that injected other devices than kubelet recorded, IDs of no known
form, devices not on the node's GPUs, devices held by two pods. Pure: standard library only.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence

from kubectl_gpu import findings
from kubectl_gpu.findings import Finding, Severity
from kubectl_gpu.gpumap import deviceid
from kubectl_gpu.gpumap.allocations import Allocation, RegisteredDevices, Source
from kubectl_gpu.gpumap.deviceid import Kind
from kubectl_gpu.gpumap.inventory import Inventory, ParsedIds
from kubectl_gpu.gpumap.rows import NodeSources, Row

_STALE_HINT = (
    "kubelet drops such entries at its next allocation or PodResources List; the devices are free"
)


def pod_key(a: Allocation) -> str:
    """The pod as the findings name it: namespace/name, or its UID when the name is unknown."""
    return f"{a.namespace}/{a.pod}" if a.pod is not None else str(a.pod_uid)


def _who(a: Allocation) -> str:
    return f"pod {pod_key(a)} container {a.container}"


def stale(entry: Allocation, reason: str) -> Finding:
    """A checkpoint entry kubelet has not dropped yet, and `reason` it no longer holds."""
    message = (
        f"kubelet's checkpoint gives {', '.join(entry.device_ids)} to {_who(entry)}, but {reason}"
    )
    return findings.warning((), "map.stale-checkpoint-entry", message, _STALE_HINT)


def unhealthy(
    sources: NodeSources, held: Sequence[Allocation], gpus: Inventory | None = None
) -> list[Finding]:
    """Registered devices are the healthy ones (docs/upstream-facts.md N1.1, N3): a device
    registered in the checkpoint but not allocatable now, or held but not registered, has turned
    unhealthy; unless NVML (`gpus`) says it no longer exists at all (a GPU re-partitioned or
    replaced since: `unresolved` says so for a held one), which is not ill health."""
    problems = []
    healthy = healthy_devices(sources)
    gone = _Gone(gpus)
    if sources.allocatable is not None and sources.registered is not None:
        lost = sources.registered.all_ids() - sources.allocatable.all_ids()
        problems += [_lost(resource, i) for resource, i in sorted(lost) if not gone(i)]
    if healthy is None:
        return problems
    # one set per resource, built once: per allocation it made 100,000 entries take 36 min
    registered = {r.resource: frozenset(r.device_ids) for r in healthy.resources}
    # and the words of a resource's finding once: 90,000 alike took 0.4 s built one by one
    said: dict[str, str] = {}
    missing: frozenset[str] = frozenset()
    for a in held:
        ids = registered.get(a.resource, missing)
        if a.source is Source.DRA or ids.issuperset(a.device_ids):
            continue
        who, end = _who(a), said.get(a.resource)
        if end is None:
            end = said[a.resource] = _unhealthy_end(a, healthy)
        for i in a.device_ids:
            if i not in ids and not gone(i):
                message = f"{i} held by {who} {end}"
                problems.append(Finding(Severity.WARNING, _UNHEALTHY, (), message, _UNHEALTHY_HINT))
    return problems


class _Gone:
    """Whether a device ID names a GPU or MIG device NVML no longer reports on the node."""

    def __init__(self, gpus: Inventory | None) -> None:
        self.gpus = gpus if gpus is not None and gpus.known else None
        self.ids = ParsedIds()

    def __call__(self, device_id: str) -> bool:
        if self.gpus is None:
            return False  # offline: nothing to tell a gone device from an unhealthy one by
        device = self.ids[device_id]
        if device.kind is Kind.UNKNOWN:
            return False
        gpu, mig = self.gpus.locate(device)
        is_mig = device.kind in (Kind.MIG, Kind.LEGACY_MIG) or device.gi is not None
        return mig is None if is_mig else gpu is None


def healthy_devices(sources: NodeSources) -> RegisteredDevices | None:
    """What kubelet offers now if it was asked, else what it registered when it wrote the file."""
    return sources.allocatable if sources.allocatable is not None else sources.registered


_UNHEALTHY = "map.device-unhealthy"
_UNHEALTHY_HINT = "check the device plugin's logs and `nvidia-smi` on the node"


def _lost(resource: str, device_id: str) -> Finding:
    message = (
        f"{device_id} ({resource}) was registered healthy in kubelet's checkpoint but is not "
        "allocatable now: it is unhealthy, or its device plugin stopped"
    )
    return findings.warning((), _UNHEALTHY, message, _UNHEALTHY_HINT)


def _unhealthy_end(a: Allocation, healthy: RegisteredDevices) -> str:
    """What a finding about a held device of `a`'s resource says after naming the holder."""
    where = (
        "is not allocatable now"
        if healthy.source is Source.PODRESOURCES
        else f"was not among the healthy {a.resource} devices kubelet registered in its checkpoint"
    )
    return f"{where}: the device is unhealthy or gone"


def disagreement(a: Allocation) -> list[Finding]:
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


def unresolved(rows: Sequence[Row], gpus: Inventory, ids: ParsedIds) -> list[Finding]:
    if not gpus.known and all(d.kind is not Kind.UNKNOWN for d in ids.values()):
        return []  # offline, only unknown IDs are found: none among the IDs parsed for the rows
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


def held_twice(rows: Sequence[Row]) -> list[Finding]:
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
