"""Kubelet's device manager, simulated: admission of device requests and who got which device.

Owns `AllocationTable` (per node: pod UID, namespace, pod, container, resource, device IDs, the
map the kubelet gRPC stand-in is fed from) and the admission checks the kubelet makes before it
asks a plugin (tests/kit/node/deviceallocation.py then asks NVIDIA's for its choice), with
kubelet's wording: `UnexpectedAdmissionError` "Allocate failed due to requested number of
devices unavailable …" and `OutOf<resource>` for a resource no plugin ever registered. Must not
choose devices (NVIDIA's plugin does) or write to the store.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tests.kit.node.matching import container_requests, quantity

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
    registered: Mapping[str, tuple[str, ...]],
    known: set[str],
    table: AllocationTable,
) -> list[Allocation]:
    """Every container's device requests with as many free devices as it asks for (which ones
    is the plugin's to say), or Rejected as kubelet would. `registered`: the healthy device IDs
    of each resource a plugin advertises now; `known`: every resource one ever advertised."""
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
            ids = _allocate(registered.get(resource, ()), resource, count, in_use)
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


def _allocate(devices: tuple[str, ...], name: str, count: int, in_use: set[str]) -> tuple[str, ...]:
    free = [d for d in devices if d not in in_use]
    if count > len(free):
        raise Rejected(
            "UnexpectedAdmissionError",
            f"Allocate failed due to requested number of devices unavailable for {name}. "
            f"Requested: {count}, Available: {len(free)}, which is unexpected",
        )
    return tuple(free[:count])
