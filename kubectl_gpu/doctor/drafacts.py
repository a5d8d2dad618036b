"""What `doctor` knows about a pod's DRA side, read from raw API objects: its claims (with
their requests, selectors and configs), the DeviceClasses, the published devices as CEL sees
them, which nodes each driver publishes for, and the NVIDIA driver's feature gates.

Lenient readers, like facts.py: a malformed object gives fewer facts, never an exception.
Must not decide anything. Pure: standard library and kubectl_gpu.dra.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any

from kubectl_gpu.dra import objects
from kubectl_gpu.dra.objects import items_at, mapping_at

_GATE = re.compile(r"^\s*(\w+)\s*=\s*(true|false)\s*$", re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class Wanted:
    """One exact request or firstAvailable alternative: its class, selectors and count."""

    name: str  # request, or request/alternative
    device_class: str
    selectors: tuple[str, ...]
    count: int


@dataclasses.dataclass(frozen=True)
class ClaimFacts:
    """A claim the pod uses: allocated or not, what it asks for, and its opaque configs."""

    name: str
    allocated: bool
    requests: tuple[tuple[Wanted, ...], ...]  # per request: its alternatives (one if exact)
    configs: tuple[tuple[str, Any], ...]  # (driver, parameters)
    node: str | None = None  # where it was allocated
    devices: tuple[tuple[str, str, str], ...] = ()  # allocated (driver, pool, device)


@dataclasses.dataclass(frozen=True)
class ClassFacts:
    name: str
    selectors: tuple[str, ...]
    configs: tuple[tuple[str, Any], ...]
    extended_resource: str | None


@dataclasses.dataclass(frozen=True)
class Device:
    """A published device: where, and the plain view CEL selectors are evaluated on."""

    node: str | None
    driver: str
    name: str
    view: Mapping[str, Any]
    pool: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        """(driver, pool, device), as an allocation result names it."""
        return (self.driver, self.pool, self.name)


def claim_from_dict(obj: Mapping[str, Any]) -> ClaimFacts:
    status = mapping_at(obj, "status")
    allocation = mapping_at(status, "allocation")
    flat = objects.is_flat(objects.version_of(obj))
    requests = []
    devices = mapping_at(mapping_at(obj, "spec"), "devices")
    for request in items_at(devices, "requests"):
        name = str(request.get("name", ""))
        alternatives = items_at(request, "firstAvailable")
        if alternatives:
            requests.append(tuple(_wanted(f"{name}/{a.get('name')}", a) for a in alternatives))
        else:
            exact = request if flat else mapping_at(request, "exactly")
            requests.append((_wanted(name, exact),))
    configs = tuple(_opaque(c) for c in items_at(devices, "config"))
    return ClaimFacts(
        name=str(mapping_at(obj, "metadata").get("name", "")),
        allocated=bool(allocation),
        requests=tuple(requests),
        configs=configs,
        node=_allocated_node(allocation),
        devices=_allocated_devices(allocation),
    )


def _allocated_devices(allocation: Mapping[str, Any]) -> tuple[tuple[str, str, str], ...]:
    results = items_at(mapping_at(allocation, "devices"), "results")
    return tuple(
        (str(r.get("driver", "")), str(r.get("pool", "")), str(r.get("device", "")))
        for r in results
    )


def held(claims: Iterable[ClaimFacts], devices: Iterable[Device]) -> list[str]:
    """What allocated claims hold, as `map` names it: each device, with its GPU's UUID where
    its slice publishes one (`gpu.nvidia.com device gpu-0 (GPU-…) through claim c`)."""
    published = {d.key: d for d in devices}
    found = []
    for claim in claims:
        for key in claim.devices:
            device = published.get(key)
            uuid = device.view["attributes"].get(device.driver, {}).get("uuid") if device else None
            shown = f"{key[2]} ({uuid})" if isinstance(uuid, str) and uuid else key[2]
            found.append(f"{key[0]} device {shown} through claim {claim.name}")
    return found


def class_from_dict(obj: Mapping[str, Any]) -> ClassFacts:
    spec = mapping_at(obj, "spec")
    extended = spec.get("extendedResourceName")
    return ClassFacts(
        name=str(mapping_at(obj, "metadata").get("name", "")),
        selectors=_selectors(spec),
        configs=tuple(_opaque(c) for c in items_at(spec, "config")),
        extended_resource=extended if isinstance(extended, str) else None,
    )


def devices_from_slice(obj: Mapping[str, Any]) -> list[Device]:
    spec = mapping_at(obj, "spec")
    driver = str(spec.get("driver", ""))
    pool = str(mapping_at(spec, "pool").get("name", ""))
    node = spec.get("nodeName")
    found = []
    for raw in items_at(spec, "devices"):
        fields = mapping_at(raw, "basic") or raw
        view = {
            "driver": driver,
            "attributes": _by_domain(mapping_at(fields, "attributes"), driver, _attribute_value),
            "capacity": _by_domain(mapping_at(fields, "capacity"), driver, _capacity_value),
            "allowMultipleAllocations": fields.get("allowMultipleAllocations") is True,
        }
        where = node if isinstance(node, str) else None
        found.append(Device(where, driver, str(raw.get("name")), view, pool))
    return found


def holders(claims: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], str]:
    """(driver, pool, device) -> `namespace/claim` for every allocated device (a device several
    claims share, with a shareID, is left out: it is not used up)."""
    found = {}
    for claim in claims:
        meta = mapping_at(claim, "metadata")
        owner = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        devices = mapping_at(mapping_at(mapping_at(claim, "status"), "allocation"), "devices")
        for result in items_at(devices, "results"):
            if not result.get("shareID"):
                key = (
                    str(result.get("driver")),
                    str(result.get("pool")),
                    str(result.get("device")),
                )
                found[key] = owner
    return found


def feature_gates(daemonsets: Iterable[Mapping[str, Any]]) -> dict[str, bool] | None:
    """The NVIDIA DRA driver's feature gates from its kubelet-plugin DaemonSet (the chart
    passes `--feature-gates=…` or the FEATURE_GATES variable); None when it is not found."""
    for daemonset in daemonsets:
        containers = items_at(
            mapping_at(mapping_at(mapping_at(daemonset, "spec"), "template"), "spec"), "containers"
        )
        if not any("dra-driver" in str(c.get("image", "")) for c in containers):
            continue
        gates: dict[str, bool] = {}
        for container in containers:
            for text in _gate_texts(container):
                for item in text.split(","):
                    match = _GATE.match(item)
                    if match:
                        gates[match.group(1)] = match.group(2).lower() == "true"
        return gates
    return None


def _gate_texts(container: Mapping[str, Any]) -> list[str]:
    texts = [
        str(a).split("=", 1)[1]
        for a in container.get("args") or []
        if str(a).startswith("--feature-gates=")
    ]
    texts += [
        str(e.get("value", ""))
        for e in items_at(container, "env")
        if e.get("name") == "FEATURE_GATES"
    ]
    return texts


def _wanted(name: str, exact: Mapping[str, Any]) -> Wanted:
    count = exact.get("count", 1)
    mode = exact.get("allocationMode", "ExactCount")
    return Wanted(
        name=name,
        device_class=str(exact.get("deviceClassName", "")),
        selectors=_selectors(exact),
        count=count if isinstance(count, int) and mode == "ExactCount" else 1,
    )


def _selectors(obj: Mapping[str, Any]) -> tuple[str, ...]:
    found = []
    for selector in items_at(obj, "selectors"):
        expression = mapping_at(selector, "cel").get("expression")
        if isinstance(expression, str):
            found.append(expression)
    return tuple(found)


def _opaque(config: Mapping[str, Any]) -> tuple[str, Any]:
    opaque = mapping_at(config, "opaque")
    return str(opaque.get("driver", "")), opaque.get("parameters")


def _allocated_node(allocation: Mapping[str, Any]) -> str | None:
    for term in items_at(mapping_at(allocation, "nodeSelector"), "nodeSelectorTerms"):
        for field in items_at(term, "matchFields"):
            values = field.get("values")
            if field.get("key") == "metadata.name" and isinstance(values, list) and values:
                return str(values[0])
    return None


def _by_domain(values: Mapping[str, Any], driver: str, read: Any) -> dict[str, dict[str, Any]]:
    """`uuid` and `gpu.nvidia.com/uuid` both become {"gpu.nvidia.com": {"uuid": …}}."""
    found: dict[str, dict[str, Any]] = {}
    for key, raw in values.items():
        domain, _, name = str(key).rpartition("/")
        value = read(raw)
        if value is not None:
            found.setdefault(domain or driver, {})[name] = value
    return found


class Version(str):
    """A `version` attribute: text to doctor's messages, a semver (not a string) to CEL."""


class Quantity(str):
    """A capacity: text to doctor's messages, a Kubernetes quantity (not a string) to CEL."""


def _attribute_value(raw: Any) -> Any:
    if not isinstance(raw, Mapping):
        return None
    for kind in ("string", "int", "bool", "version"):
        if kind in raw:
            value = raw[kind]
            return Version(value) if kind == "version" and isinstance(value, str) else value
    return None


def _capacity_value(raw: Any) -> Any:
    return Quantity(raw.get("value")) if isinstance(raw, Mapping) and "value" in raw else None
