"""DRA allocations from the API alone: ResourceClaims × ResourceSlices × Pods → map rows.

Owns reading a pod's claims per container (direct, from a template, or made for an extended
resource, KEP-5004) and joining them with the claims' allocations and the ResourceSlices'
devices (read by `kubectl_gpu.dra`, any served version): a claim result `(driver, pool,
device)` names a ResourceSlice device, whose `uuid` (or, for a MIG device, `parentUUID`) is the
physical GPU (docs/upstream-facts.md N5). Each row also carries the share of a consumable
device, the sharing config in effect, and the partitionable GPU's counters in use. Only the
driver `gpu.nvidia.com` is mapped. Must not read anything (the workflow lists the objects). Pure:
standard library only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubectl_gpu.dra import allocation, quantity, slices
from kubectl_gpu.dra.allocation import Claim, Result, claim_of
from kubectl_gpu.dra.slices import CounterSet, SliceDevice
from kubectl_gpu.dra.slices import devices as slice_devices
from kubectl_gpu.gpumap.allocations import Source
from kubectl_gpu.gpumap.join import Row

__all__ = [
    "Claim",
    "CounterSet",
    "PodClaims",
    "Result",
    "SliceDevice",
    "claim_of",
    "pod_claims",
    "rows",
    "slice_devices",
]

DRIVER = "gpu.nvidia.com"  # NVIDIA's DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu)
CLAIM_RESOURCE_PREFIX = "claim:"  # as pod status names a DRA resource: claim:<claim>/<request>


@dataclasses.dataclass(frozen=True)
class PodClaims:
    """A pod's node, and which containers use which claim (and request, None for all)."""

    namespace: str
    name: str
    uid: str
    node: str | None
    uses: tuple[tuple[str, str, str | None], ...]  # (container, claim name, request)


# --- from API objects ---------------------------------------------------------------------------


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


def _map(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def _items(obj: Mapping[str, Any], key: str) -> list[Any]:
    value = obj.get(key)
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


# --- the join ------------------------------------------------------------------------------------


def rows(
    claims: Iterable[Claim],
    devices: Iterable[SliceDevice],
    pods: Sequence[PodClaims],
    counter_sets: Iterable[CounterSet] = (),
) -> list[Row]:
    """One row per allocated NVIDIA device and container using it (container None when no
    container of a reserving pod names the claim; pod None when no pod reserves it yet)."""
    claims = list(claims)
    by_id = {(d.driver, d.pool, d.name): d for d in devices}
    by_pod = {(p.namespace, p.name): p for p in pods}
    used = [
        by_id[(r.driver, r.pool, r.device)]
        for c in claims
        for r in c.results
        if (r.driver, r.pool, r.device) in by_id
    ]
    usage = slices.usage(counter_sets, used)
    found: list[Row] = []
    for claim in claims:
        holders = [by_pod.get((claim.namespace, name)) for name, _ in claim.reserved_by]
        for result in claim.results:
            if result.driver != DRIVER:
                continue
            device = by_id.get((result.driver, result.pool, result.device))
            base = _row(claim, result, device, _counters(device, usage))
            found += _result_rows(claim, result, base, holders)
    return found


def _result_rows(
    claim: Claim, result: Result, base: Row, holders: list[PodClaims | None]
) -> list[Row]:
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


def _counters(device: SliceDevice | None, usage: Mapping[Any, list[Any]]) -> str | None:
    """`memory 20Gi/80Gi, multiprocessors 28/98` for the counter sets the device draws from."""
    if device is None:
        return None
    parts = [
        f"{counter} {quantity.format_binary(used)}/{quantity.format_binary(total)}"
        for set_name, _ in device.consumes
        for counter, used, total in usage.get((device.driver, device.pool, set_name), [])
    ]
    return ", ".join(parts) or None


def _row(claim: Claim, result: Result, device: SliceDevice | None, counters: str | None) -> Row:
    is_mig = device is not None and (device.parent_uuid is not None or device.type == "mig")
    kind = allocation.device_kind_of(device.type if device else None, is_mig)
    config = allocation.config_in_effect(claim.configs, result, kind)
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
        share_id=result.share_id,
        consumed=", ".join(f"{k}={v}" for k, v in result.consumed) or None,
        sharing=allocation.describe(config),
        counters=counters,
    )
