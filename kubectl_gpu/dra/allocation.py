"""A ResourceClaim's allocation as the scheduler wrote it: one result per allocated device
(with the firstAvailable alternative chosen, the share of a consumable device, and the
capacity it consumes), the configs copied from its DeviceClasses and from the claim itself,
and the pods reserving it. The same shape in v1, v1beta2 and v1beta1.

Owns which sharing config is in effect for a result, as NVIDIA's driver decides it: configs
from classes come before configs from the claim, the last one naming the result's request
wins, and failing that the last one naming no request whose kind fits the device.
Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from kubectl_gpu.dra import classes, sharing
from kubectl_gpu.dra.objects import items_at, mapping_at


@dataclasses.dataclass(frozen=True)
class Result:
    """One allocated device of a claim: `<driver>/<pool>/<device>` for request `request`
    (`<request>/<alternative>` when a firstAvailable alternative was chosen)."""

    request: str
    driver: str
    pool: str
    device: str
    share_id: str | None = None  # set when several claims share a consumable device
    consumed: tuple[tuple[str, str], ...] = ()  # consumedCapacity: (capacity, quantity)

    @property
    def device_id(self) -> str:
        """The device's identity, as pod status `resourceID` spells it."""
        return f"{self.driver}/{self.pool}/{self.device}"

    @property
    def alternative(self) -> str | None:
        """The firstAvailable alternative the scheduler chose, if the request had several."""
        return self.request.split("/", 1)[1] if "/" in self.request else None


@dataclasses.dataclass(frozen=True)
class Config:
    """An opaque config in the allocation: where it came from, the requests it names."""

    source: str  # FromClass | FromClaim
    requests: tuple[str, ...]
    driver: str
    parameters: Any


@dataclasses.dataclass(frozen=True)
class Claim:
    """A ResourceClaim's allocation and the pods (namespace-local names, UIDs) reserving it."""

    namespace: str
    name: str
    results: tuple[Result, ...]
    reserved_by: tuple[tuple[str, str], ...]  # (pod name, pod UID)
    configs: tuple[Config, ...] = ()


def claim_of(obj: Mapping[str, Any]) -> Claim | None:
    """A claim with an allocation, or None when it has none yet."""
    meta, status = mapping_at(obj, "metadata"), mapping_at(obj, "status")
    devices = mapping_at(mapping_at(status, "allocation"), "devices")
    results = tuple(
        _result(r) for r in items_at(devices, "results") if {"driver", "pool", "device"} <= r.keys()
    )
    if not results:
        return None
    reserved = tuple(
        (str(r.get("name", "")), str(r.get("uid", "")))
        for r in items_at(status, "reservedFor")
        if r.get("resource") == "pods"
    )
    configs = tuple(_config(c) for c in items_at(devices, "config"))
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
    return Claim(namespace, name, results, reserved, configs)


def _result(raw: Mapping[str, Any]) -> Result:
    share = raw.get("shareID")
    consumed = tuple((str(k), str(v)) for k, v in mapping_at(raw, "consumedCapacity").items())
    return Result(
        str(raw.get("request", "")),
        str(raw["driver"]),
        str(raw["pool"]),
        str(raw["device"]),
        share if isinstance(share, str) else None,
        consumed,
    )


def _config(raw: Mapping[str, Any]) -> Config:
    opaque = mapping_at(raw, "opaque")
    requests = raw.get("requests")
    names = tuple(str(r) for r in requests) if isinstance(requests, list) else ()
    return Config(
        str(raw.get("source", "")), names, str(opaque.get("driver", "")), opaque.get("parameters")
    )


def config_in_effect(
    configs: Sequence[Config], result: Result, device_type: str | None
) -> Config | None:
    """The NVIDIA config the driver applies to `result` (None: its defaults, no sharing)."""
    ordered = [c for c in configs if c.source != "FromClaim"]
    ordered += [c for c in configs if c.source == "FromClaim"]
    main = result.request.split("/", 1)[0]
    for config in reversed(ordered):
        if config.driver != result.driver:
            continue
        if result.request in config.requests or main in config.requests:
            return config
        kind = sharing.kind_of(config.parameters)
        fits = device_type is None or sharing.device_for(kind or "") == device_type
        if not config.requests and fits:
            return config
    return None


def describe(config: Config | None) -> str | None:
    """The sharing a config sets up, in a few words: `TimeSlicing (Long)`, `MPS (50% SMs)`."""
    if config is None:
        return None
    parameters = config.parameters if isinstance(config.parameters, Mapping) else {}
    strategy = sharing.strategy_of(parameters)
    if strategy is None:
        return "exclusive"
    settings = mapping_at(mapping_at(parameters, "sharing"), "timeSlicingConfig" if strategy ==
                    sharing.TIME_SLICING else "mpsConfig")  # fmt: skip
    details = [f"{v}" for k, v in settings.items() if k == "interval"]
    if "defaultActiveThreadPercentage" in settings:
        details.append(f"{settings['defaultActiveThreadPercentage']}% SMs")
    if "defaultPinnedDeviceMemoryLimit" in settings:
        details.append(f"{settings['defaultPinnedDeviceMemoryLimit']} pinned")
    return f"{strategy} ({', '.join(details)})" if details else strategy


def device_kind_of(type_attribute: str | None, is_mig: bool) -> str | None:
    """The device type the driver matches configs against."""
    if type_attribute in (classes.GPU, classes.MIG, classes.VFIO):
        return type_attribute
    return classes.MIG if is_mig else None
