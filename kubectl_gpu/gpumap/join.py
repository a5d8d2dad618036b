"""The node map: allocations × pods × physical GPUs → rows, and what the sources disagree on.

Owns joining what kubelet's checkpoint and PodResources say about one node with a pod list
(the only link between the checkpoint's pod UIDs and PodResources' names, docs/upstream-facts.md N3)
and an optional NVML inventory, into one `Row` per advertised device ID held by a container
(or free), each resolved to its physical GPU and MIG device as far as the inputs allow.
Offline, without an inventory, rows still carry the UUID parsed from the ID and a null index
and model. The rows are `rows.py`'s, resolving a device to its GPU `inventory.py`'s, and the
findings about what the sources disagree on `disagreements.py`'s.
Must not read anything (the adapters do) or render (the CLI does). Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from kubectl_gpu.findings import Finding
from kubectl_gpu.gpumap import deviceid
from kubectl_gpu.gpumap.allocations import Allocation, Gpu, PodRef
from kubectl_gpu.gpumap.disagreements import (
    disagreement,
    healthy_devices,
    held_twice,
    pod_key,
    stale,
    unhealthy,
    unresolved,
)
from kubectl_gpu.gpumap.inventory import Inventory, ParsedIds
from kubectl_gpu.gpumap.rows import SHARED_SUFFIX, NodeSources, Row, make_row

__all__ = ["SHARED_SUFFIX", "NodeMap", "NodeSources", "Row", "make"]


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
    gpus = Inventory(inventory)
    ids = ParsedIds()
    rows = _sorted((make_row(node, a, ids[i], gpus) for a in held for i in a.device_ids), ids)
    free = _sorted(_free_rows(node, sources, rows, gpus), ids)
    problems += unhealthy(sources, held, gpus)
    problems += [f for a in held for f in disagreement(a)]
    problems += unresolved(rows, gpus, ids) + held_twice(rows)
    return NodeMap(tuple(rows), tuple(free), tuple(dict.fromkeys(problems)))


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
        return entries, [stale(e, f"the pod list has no pod with UID {e.pod_uid}") for e in gone]
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
            problems.append(stale(entry, "kubelet's PodResources List no longer reports it"))
    return live, problems


def _shares_devices(live: Allocation, entry: Allocation) -> bool:
    same_pod = live.pod is None or entry.pod is None or pod_key(live) == pod_key(entry)
    overlap = set(live.device_ids) & set(entry.device_ids)
    return same_pod and live.resource == entry.resource and bool(overlap)


def _same_allocation(live: Allocation, entry: Allocation) -> bool:
    return live.container == entry.container and _shares_devices(live, entry)


def _enriched(live: Allocation, entry: Allocation) -> Allocation:
    return dataclasses.replace(
        live, pod_uid=live.pod_uid or entry.pod_uid, response=live.response or entry.response
    )


def _free_rows(
    node: str | None, sources: NodeSources, rows: Sequence[Row], gpus: Inventory
) -> list[Row]:
    advertised = healthy_devices(sources)
    if advertised is None:
        return []
    held = {(r.resource, r.device_id) for r in rows}
    free = []
    for group in advertised.resources:
        nobody = Allocation(None, None, None, "", group.resource, (), advertised.source)
        for device in map(deviceid.parse, group.device_ids):
            if (group.resource, device.raw) not in held:
                free.append(
                    dataclasses.replace(make_row(node, nobody, device, gpus), container=None)
                )
    return free


def _sorted(rows: Iterable[Row], ids: ParsedIds) -> list[Row]:
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
