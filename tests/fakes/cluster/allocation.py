"""Kubelet's device manager, simulated: admission of device requests and who got which device.

Owns `AllocationTable` (per node: pod UID, namespace, pod, container, resource, device IDs, the
map the kubelet gRPC stand-in is fed from), admission with kubelet's wording
(`UnexpectedAdmissionError` "Allocate failed due to requested number of devices unavailable …",
the plugin's `failRequestsGreaterThanOne` refusal, `OutOf<resource>` for a resource no plugin
ever registered) and the plugin's preferred allocation (v0.20 `distributed`: replicas of the
least-used GPU first; `packed`: fill a GPU first). Must not write to the store.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.fakes.cluster.devices import Device, Resource
from tests.fakes.cluster.matching import container_requests, quantity

Obj = dict[str, Any]


@dataclass(frozen=True)
class Allocation:
    """One container's devices of one resource, as kubelet checkpoints them."""

    pod_uid: str
    namespace: str
    pod: str
    container: str
    resource: str
    device_ids: tuple[str, ...]


class Rejected(Exception):
    """Admission refused: the pod goes Failed with this reason and message."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class AllocationTable:
    """Allocations per node; read from test threads, written by the kubelet simulation."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._nodes: dict[str, dict[str, list[Allocation]]] = {}

    def of_node(self, node: str) -> list[Allocation]:
        with self._lock:
            return [a for pod in self._nodes.get(node, {}).values() for a in pod]

    def pods(self, node: str) -> set[str]:
        with self._lock:
            return set(self._nodes.get(node, {}))

    def in_use(self, node: str, resource: str) -> set[str]:
        return {i for a in self.of_node(node) if a.resource == resource for i in a.device_ids}

    def record(self, node: str, uid: str, allocations: list[Allocation]) -> None:
        with self._lock:
            self._nodes.setdefault(node, {})[uid] = allocations

    def release(self, node: str, uid: str) -> None:
        with self._lock:
            self._nodes.get(node, {}).pop(uid, None)

    def drop_node(self, node: str) -> None:
        with self._lock:
            self._nodes.pop(node, None)


def admit(
    pod: Obj,
    node: Obj,
    registered: Mapping[str, Resource],
    known: set[str],
    table: AllocationTable,
) -> list[Allocation]:
    """Allocate every container's device requests, or raise Rejected as kubelet would."""
    node_name = str(node["metadata"]["name"])
    meta = pod["metadata"]
    taken: dict[str, set[str]] = {}
    allocations: list[Allocation] = []
    spec = pod.get("spec") or {}
    for container in spec.get("containers") or []:
        for resource, count in sorted(container_requests(container).items()):
            if resource not in registered and resource not in known:
                _check_node_has(node, resource, count)
                continue  # not a device-plugin resource: nothing to allocate
            in_use = taken.setdefault(resource, table.in_use(node_name, resource))
            ids = _allocate(registered.get(resource), resource, count, in_use)
            in_use.update(ids)
            allocations.append(
                Allocation(
                    meta["uid"], meta["namespace"], meta["name"], container["name"], resource, ids
                )
            )
    return allocations


def _check_node_has(node: Obj, resource: str, count: int) -> None:
    capacity = quantity(((node.get("status") or {}).get("allocatable") or {}).get(resource, 0))
    if count > capacity:
        raise Rejected(
            f"OutOf{resource}",
            f"Node didn't have enough resource: {resource}, requested: {count}, used: 0, "
            f"capacity: {capacity}",
        )


def _allocate(
    resource: Resource | None, name: str, count: int, in_use: set[str]
) -> tuple[str, ...]:
    free = [d for d in (resource.devices if resource else ()) if d.id not in in_use]
    if resource is not None and resource.shared and resource.fail_requests_greater_than_one:
        if count > 1:
            raise Rejected(
                "UnexpectedAdmissionError",
                f"Allocate failed due to rpc error: code = Unknown desc = invalid allocation "
                f'request for "{name}": invalid request: maximum request size for shared '
                f"resources is 1; found {count}, which is unexpected",
            )
    if count > len(free):
        raise Rejected(
            "UnexpectedAdmissionError",
            f"Allocate failed due to requested number of devices unavailable for {name}. "
            f"Requested: {count}, Available: {len(free)}, which is unexpected",
        )
    assert resource is not None
    used = Counter(_physical(i) for i in in_use)
    return tuple(d.id for d in preferred(resource, free, count, used))


def _physical(device_id: str) -> str:
    return device_id.split("::", 1)[0]


def _replica(device: Device) -> int:
    _, _, replica = device.id.partition("::")
    return int(replica) if replica.isdigit() else 0


def preferred(
    resource: Resource, free: Iterable[Device], count: int, used: Counter[str]
) -> list[Device]:
    """GetPreferredAllocation: which free devices the plugin would hand out."""
    pool = list(free)
    chosen: list[Device] = []
    for _ in range(count):

        def rank(d: Device) -> tuple[int, int, int]:
            load = used[d.physical]
            if resource.policy == "packed":
                load = -load
            return (load if resource.shared else 0, d.gpu_index, _replica(d))

        best = min(pool, key=rank)
        pool.remove(best)
        used[best.physical] += 1
        chosen.append(best)
    return chosen
