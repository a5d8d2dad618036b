"""ResourceSlices as a DRA driver publishes them, in any served version: the devices with the
attributes the map uses, their consumable capacity, and the counter sets partitionable
devices draw from.

In `resource.k8s.io/v1beta1` a device keeps its fields under `basic:`; in v1beta2 and v1 they
sit on the device. NVIDIA's driver names attributes in its own domain (`uuid`, or qualified
`gpu.nvidia.com/uuid`): `type` (gpu, mig, vfio), `uuid`, `parentUUID` (a MIG device's GPU),
`profile`, `productName`. A partitionable GPU publishes a counter set (memory,
multiprocessors, …) that the whole GPU and each MIG placement consume from; a device with
`allowMultipleAllocations` can be shared by several claims, each consuming some capacity.
Must not read anything. Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from kubectl_gpu.dra import quantity
from kubectl_gpu.dra.objects import items_at, mapping_at

Counters = tuple[tuple[str, Fraction], ...]  # (counter name, value), in published order


@dataclasses.dataclass(frozen=True)
class SliceDevice:
    """A device a ResourceSlice publishes, with the attributes the map uses."""

    driver: str
    pool: str
    name: str
    node: str | None
    uuid: str | None
    parent_uuid: str | None
    profile: str | None
    model: str | None
    type: str | None = None
    shareable: bool = False  # allowMultipleAllocations: several claims may hold it
    consumes: tuple[tuple[str, Counters], ...] = ()  # (counter set, what it takes)


@dataclasses.dataclass(frozen=True)
class CounterSet:
    """A counter set of one pool: the capacity its partitions share (one physical GPU)."""

    driver: str
    pool: str
    name: str
    counters: Counters


def devices(obj: Mapping[str, Any]) -> list[SliceDevice]:
    """The devices of one ResourceSlice (NVIDIA's driver names the pool after the node)."""
    spec = mapping_at(obj, "spec")
    driver, pool = str(spec.get("driver", "")), str(mapping_at(spec, "pool").get("name", ""))
    node = spec.get("nodeName")
    found = []
    for raw in items_at(spec, "devices"):
        if "name" not in raw:
            continue
        device = mapping_at(raw, "basic") or raw  # v1beta1 keeps the fields under `basic`
        attributes = mapping_at(device, "attributes")
        found.append(
            SliceDevice(
                driver=driver,
                pool=pool,
                name=str(raw["name"]),
                node=node if isinstance(node, str) else None,
                uuid=attribute(attributes, driver, "uuid"),
                parent_uuid=attribute(attributes, driver, "parentUUID"),
                profile=attribute(attributes, driver, "profile"),
                model=attribute(attributes, driver, "productName"),
                type=attribute(attributes, driver, "type"),
                shareable=device.get("allowMultipleAllocations") is True,
                consumes=_consumption(device),
            )
        )
    return found


def counter_sets(obj: Mapping[str, Any]) -> list[CounterSet]:
    """The shared counter sets one ResourceSlice publishes."""
    spec = mapping_at(obj, "spec")
    driver, pool = str(spec.get("driver", "")), str(mapping_at(spec, "pool").get("name", ""))
    return [
        CounterSet(driver, pool, str(s.get("name", "")), _counters(mapping_at(s, "counters")))
        for s in items_at(spec, "sharedCounters")
    ]


def _consumption(device: Mapping[str, Any]) -> tuple[tuple[str, Counters], ...]:
    return tuple(
        (str(c.get("counterSet", "")), _counters(mapping_at(c, "counters")))
        for c in items_at(device, "consumesCounters")
    )


def _counters(counters: Mapping[str, Any]) -> Counters:
    found = []
    for name, counter in counters.items():
        value = quantity.parse(counter.get("value")) if isinstance(counter, Mapping) else None
        if value is not None:
            found.append((str(name), value))
    return tuple(found)


def attribute(attributes: Mapping[str, Any], driver: str, name: str) -> str | None:
    """An attribute value; unqualified names are in the driver's domain (`gpu.nvidia.com/uuid`)."""
    value = attributes.get(name) or attributes.get(f"{driver}/{name}")
    if not isinstance(value, Mapping):
        return None
    for kind in ("string", "version", "int", "bool"):
        if kind in value:
            return str(value[kind])
    return None


def usage(
    sets: Iterable[CounterSet], used_devices: Iterable[SliceDevice]
) -> dict[tuple[str, str, str], list[tuple[str, Fraction, Fraction]]]:
    """(driver, pool, counter set) -> [(counter, used, total)]: what the allocated devices
    (each counted once, however many claims share it) take of each counter set."""
    taken: dict[tuple[str, str, str, str], Fraction] = {}
    for device in {(d.driver, d.pool, d.name): d for d in used_devices}.values():
        for set_name, counters in device.consumes:
            for counter, value in counters:
                key = (device.driver, device.pool, set_name, counter)
                taken[key] = taken.get(key, Fraction(0)) + value
    found: dict[tuple[str, str, str], list[tuple[str, Fraction, Fraction]]] = {}
    for s in sets:
        found[(s.driver, s.pool, s.name)] = [
            (counter, taken.get((s.driver, s.pool, s.name, counter), Fraction(0)), total)
            for counter, total in s.counters
        ]
    return found
