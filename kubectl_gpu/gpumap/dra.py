"""DRA allocations from the API alone: ResourceClaims × ResourceSlices × Pods → map rows.

Owns reading the `resource.k8s.io/v1` objects the map needs into small frozen values (a claim's
allocation results and the pods reserving it, a slice's devices with NVIDIA's `uuid`,
`parentUUID`, `profile` and `productName` attributes, a pod's claims per container) and joining
them: a claim result `(driver, pool, device)` names a ResourceSlice device, whose `uuid` (or, for
a MIG device, `parentUUID`) is the physical GPU (reference/node-state.md §5). Only the driver
`gpu.nvidia.com` is mapped. Must not read anything (the workflow lists the objects). Pure:
standard library only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubectl_gpu.gpumap.allocations import Source
from kubectl_gpu.gpumap.join import Row

DRIVER = "gpu.nvidia.com"  # NVIDIA's DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu)
CLAIM_RESOURCE_PREFIX = "claim:"  # as pod status names a DRA resource: claim:<claim>/<request>


@dataclasses.dataclass(frozen=True)
class Result:
    """One allocated device of a claim: `<driver>/<pool>/<device>` for request `request`."""

    request: str
    driver: str
    pool: str
    device: str

    @property
    def device_id(self) -> str:
        """The device's identity, as pod status `resourceID` spells it."""
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclasses.dataclass(frozen=True)
class Claim:
    """A ResourceClaim's allocation and the pods (namespace-local names, UIDs) reserving it."""

    namespace: str
    name: str
    results: tuple[Result, ...]
    reserved_by: tuple[tuple[str, str], ...]  # (pod name, pod UID)


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


@dataclasses.dataclass(frozen=True)
class PodClaims:
    """A pod's node, and which containers use which claim (and request, None for all)."""

    namespace: str
    name: str
    uid: str
    node: str | None
    uses: tuple[tuple[str, str, str | None], ...]  # (container, claim name, request)


# --- from API objects ---------------------------------------------------------------------------


def claim_of(obj: Mapping[str, Any]) -> Claim | None:
    """A claim with an allocation, or None when it has none yet."""
    meta, status = _map(obj, "metadata"), _map(obj, "status")
    allocation = _map(_map(status, "allocation"), "devices")
    results = tuple(
        Result(str(r.get("request", "")), str(r["driver"]), str(r["pool"]), str(r["device"]))
        for r in _items(allocation, "results")
        if isinstance(r, Mapping) and {"driver", "pool", "device"} <= r.keys()
    )
    if not results:
        return None
    reserved = tuple(
        (str(r.get("name", "")), str(r.get("uid", "")))
        for r in _items(status, "reservedFor")
        if isinstance(r, Mapping) and r.get("resource") == "pods"
    )
    return Claim(str(meta.get("namespace", "")), str(meta.get("name", "")), results, reserved)


def slice_devices(obj: Mapping[str, Any]) -> list[SliceDevice]:
    """The devices of one ResourceSlice (the pool is named after the node by NVIDIA's driver)."""
    spec = _map(obj, "spec")
    driver, pool = str(spec.get("driver", "")), str(_map(spec, "pool").get("name", ""))
    node = spec.get("nodeName")
    found = []
    for device in _items(spec, "devices"):
        if not isinstance(device, Mapping) or "name" not in device:
            continue
        attributes = _map(device, "attributes")
        found.append(
            SliceDevice(
                driver=driver,
                pool=pool,
                name=str(device["name"]),
                node=node if isinstance(node, str) else None,
                uuid=_attribute(attributes, driver, "uuid"),
                parent_uuid=_attribute(attributes, driver, "parentUUID"),
                profile=_attribute(attributes, driver, "profile"),
                model=_attribute(attributes, driver, "productName"),
            )
        )
    return found


def pod_claims(obj: Mapping[str, Any]) -> PodClaims:
    """Which claim each container uses: container claim → pod claim → ResourceClaim name."""
    meta, spec, status = _map(obj, "metadata"), _map(obj, "spec"), _map(obj, "status")
    names = {str(c.get("name")): c.get("resourceClaimName") for c in _items(spec, "resourceClaims")}
    for generated in _items(status, "resourceClaimStatuses"):  # claims made from templates
        names[str(generated.get("name"))] = generated.get("resourceClaimName")
    uses = []
    for container in [*_items(spec, "initContainers"), *_items(spec, "containers")]:
        for ref in _items(_map(container, "resources"), "claims"):
            claim = names.get(str(ref.get("name")))
            if isinstance(claim, str):
                uses.append((str(container.get("name")), claim, ref.get("request") or None))
    uses += _extended_resource_uses(status)
    node = spec.get("nodeName")
    return PodClaims(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        node=node if isinstance(node, str) else None,
        uses=tuple(uses),
    )


def _extended_resource_uses(status: Mapping[str, Any]) -> list[tuple[str, str, str | None]]:
    """KEP-5004: an extended resource (nvidia.com/gpu) served by DRA through one claim."""
    extended = _map(status, "extendedResourceClaimStatus")
    claim = extended.get("resourceClaimName")
    if not isinstance(claim, str):
        return []
    return [
        (str(m.get("containerName")), claim, str(m.get("requestName")) or None)
        for m in _items(extended, "requestMappings")
    ]


def _attribute(attributes: Mapping[str, Any], driver: str, name: str) -> str | None:
    """An attribute value; unqualified names are in the driver's domain (`gpu.nvidia.com/uuid`)."""
    value = attributes.get(name) or attributes.get(f"{driver}/{name}")
    if not isinstance(value, Mapping):
        return None
    for kind in ("string", "version", "int", "bool"):
        if kind in value:
            return str(value[kind])
    return None


def _map(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def _items(obj: Mapping[str, Any], key: str) -> list[Any]:
    value = obj.get(key)
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


# --- the join ------------------------------------------------------------------------------------


def rows(
    claims: Iterable[Claim], devices: Iterable[SliceDevice], pods: Sequence[PodClaims]
) -> list[Row]:
    """One row per allocated NVIDIA device and container using it (container None when no
    container of a reserving pod names the claim; pod None when no pod reserves it yet)."""
    by_id = {(d.driver, d.pool, d.name): d for d in devices}
    by_pod = {(p.namespace, p.name): p for p in pods}
    found: list[Row] = []
    for claim in claims:
        holders = [by_pod.get((claim.namespace, name)) for name, _ in claim.reserved_by]
        for result in claim.results:
            if result.driver != DRIVER:
                continue
            device = by_id.get((result.driver, result.pool, result.device))
            found += _result_rows(claim, result, device, holders)
    return found


def _result_rows(
    claim: Claim, result: Result, device: SliceDevice | None, holders: list[PodClaims | None]
) -> list[Row]:
    base = _row(claim, result, device)
    if not claim.reserved_by:
        return [base]
    made = []
    for (name, uid), pod in zip(claim.reserved_by, holders, strict=True):
        held = dataclasses.replace(
            base, pod=name, pod_uid=uid or None, node=base.node or (pod.node if pod else None)
        )
        containers = _containers(pod, claim.name, result.request) if pod else []
        made += [dataclasses.replace(held, container=c) for c in containers] or [held]
    return made


def _containers(pod: PodClaims, claim: str, request: str) -> list[str]:
    """Containers naming the claim, for all its requests or this one (`<main>/<sub>` too)."""
    main = request.split("/", 1)[0]
    wanted = [c for c, name, r in pod.uses if name == claim and r in (None, request, main)]
    return list(dict.fromkeys(wanted))


def _row(claim: Claim, result: Result, device: SliceDevice | None) -> Row:
    is_mig = device is not None and device.parent_uuid is not None
    return Row(
        node=device.node if device else None,
        gpu_index=None,
        gpu_uuid=(device.parent_uuid if is_mig else device.uuid) if device else None,
        gpu_model=device.model if device else None,
        mig_uuid=device.uuid if device and is_mig else None,
        mig_profile=device.profile if device and is_mig else None,
        gpu_instance=None,
        compute_instance=None,
        device_id=result.device_id,
        resource=f"{CLAIM_RESOURCE_PREFIX}{claim.name}/{result.request}",
        replica=None,
        namespace=claim.namespace,
        pod=None,
        pod_uid=None,
        container=None,
        source=Source.DRA.value,
    )
