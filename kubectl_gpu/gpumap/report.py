"""The per-node report the agent publishes and `kubectl gpu map` reads (a GPUNodeReport).

Owns `NodeReport` (what one node's agent saw: its GPUs and MIG devices, the allocations kubelet
reports after the join merged its sources, the healthy devices per resource, the findings),
its plain-dict form (schemas/node-report.v1.json: `spec` and `status`), `build` from the join's
inputs, the content digest that ignores the timestamp (the agent writes only when it changes),
and `sources`/`inventory`, which turn a report back into the join's inputs. Must not read or
write anything, or look at a clock (`now` is an argument). Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from kubectl_gpu import __version__, findings
from kubectl_gpu.findings import Finding
from kubectl_gpu.gpumap import join
from kubectl_gpu.gpumap.allocations import (
    Allocation,
    Gpu,
    MigDevice,
    RegisteredDevices,
    ResourceDevices,
    Source,
)
from kubectl_gpu.gpumap.join import NodeSources, Row
from kubectl_gpu.keys import API_VERSION as API_VERSION  # one definition, in keys

T = TypeVar("T")

KIND = "GPUNodeReport"
MIG_ENABLED, MIG_DISABLED = "enabled", "disabled"


class ReportError(ValueError):
    """A report object does not have the schema's shape."""


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where a GPU instance sits on its GPU, in memory slices."""

    start: int
    size: int


@dataclasses.dataclass(frozen=True)
class MigInstance:
    """A MIG device as the report keeps it: UUID, profile, GI/CI IDs and placement."""

    uuid: str
    profile: str | None
    gi: int | None
    ci: int | None
    placement: Placement | None = None


@dataclasses.dataclass(frozen=True)
class InventoryGpu:
    """A physical GPU as the report keeps it (NVML): more than the join needs."""

    index: int | None
    uuid: str
    model: str | None = None
    minor: int | None = None
    memory_mib: int | None = None
    mig_mode: str | None = None  # MIG_ENABLED, MIG_DISABLED, None when not MIG-capable
    mig_devices: tuple[MigInstance, ...] = ()

    def as_gpu(self) -> Gpu:
        """The join's view of this GPU."""
        migs = tuple(MigDevice(m.uuid, m.profile, m.gi, m.ci) for m in self.mig_devices)
        return Gpu(self.index, self.uuid, self.model, self.minor, migs)

    @classmethod
    def of(cls, gpu: Gpu | InventoryGpu) -> InventoryGpu:
        """Accept the join's plain `Gpu` too (memory, MIG mode and placements unknown)."""
        if isinstance(gpu, InventoryGpu):
            return gpu
        migs = tuple(MigInstance(m.uuid, m.profile, m.gi, m.ci) for m in gpu.mig_devices)
        return cls(gpu.index, gpu.uuid, gpu.model, gpu.minor, mig_devices=migs)


@dataclasses.dataclass(frozen=True)
class NodeReport:
    """What one node's agent saw. `generated_at` is RFC 3339 UTC (`2026-01-02T03:04:05Z`)."""

    node: str
    agent_version: str
    generated_at: str
    gpus: tuple[InventoryGpu, ...]
    allocations: tuple[Allocation, ...]
    registered: RegisteredDevices | None
    allocatable: RegisteredDevices | None
    findings: tuple[Finding, ...] = ()

    @property
    def digest(self) -> str:
        """`sha256:<hex>` of everything but the time, so an unchanged node hashes the same."""
        content = {"node": self.node, **_status(self)}
        text = json.dumps(content, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        """The object's `spec` and `status` (schemas/node-report.v1.json)."""
        status = {"generatedAt": self.generated_at, "digest": self.digest, **_status(self)}
        return {"spec": {"node": self.node}, "status": status}

    def sources(self) -> NodeSources:
        """The join's inputs again: the allocations as the source they came from."""
        live = [a for a in self.allocations if a.source is not Source.CHECKPOINT]
        from_checkpoint = tuple(a for a in self.allocations if a.source is Source.CHECKPOINT)
        podresources = tuple(live) if live or self.allocatable is not None else None
        return NodeSources(
            node=self.node,
            checkpoint=from_checkpoint,
            registered=self.registered,
            podresources=podresources,
            allocatable=self.allocatable,
        )

    def inventory(self) -> tuple[Gpu, ...] | None:
        """The join's inventory; None when the agent reported no GPUs (NVML not read)."""
        return tuple(g.as_gpu() for g in self.gpus) or None


def build(
    node: str,
    inventory: Sequence[Gpu | InventoryGpu] | None,
    sources: NodeSources,
    now: dt.datetime,
    inventory_error: str | None = None,
) -> NodeReport:
    """The report of one node: the join merges the sources, the report keeps the result.

    `inventory` None means NVML was not read (`inventory_error` says why: the report then
    carries it as a finding, so `map` and `status` can say why the node shows no GPUs);
    `now` must be timezone-aware.
    """
    gpus = tuple(InventoryGpu.of(g) for g in inventory or ())
    view = None if inventory is None else tuple(g.as_gpu() for g in gpus)
    joined = join.make(dataclasses.replace(sources, node=node), (), view)
    return NodeReport(
        node=node,
        agent_version=__version__,
        generated_at=timestamp(now),
        gpus=gpus,
        allocations=_allocations(joined.rows),
        registered=sources.registered,
        allocatable=sources.allocatable,
        findings=joined.findings + _unread(inventory_error),
    )


NVML_UNREADABLE = "report.nvml-unreadable"


def _unread(inventory_error: str | None) -> tuple[Finding, ...]:
    if inventory_error is None:
        return ()
    message = f"the agent cannot read the GPUs through NVML: {inventory_error}"
    hint = (
        "check the agent pod's runtime class and that the NVIDIA driver is loaded "
        "(kubectl logs -n kubectl-gpu <agent pod>)"
    )
    return (findings.error((), NVML_UNREADABLE, message, hint),)


def timestamp(now: dt.datetime) -> str:
    """RFC 3339 in UTC, to the second, as Kubernetes writes times."""
    return now.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> dt.datetime | None:
    """A Kubernetes time (`…Z`), or None when it is not one."""
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)


def _allocations(rows: Iterable[Row]) -> tuple[Allocation, ...]:
    """One allocation per (pod, container, resource, source) again, from the joined rows."""
    grouped: dict[tuple[Any, ...], list[str]] = {}
    for r in rows:
        key = (r.pod_uid, r.namespace, r.pod, r.container or "", r.resource, r.source)
        grouped.setdefault(key, []).append(r.device_id)
    return tuple(
        Allocation(uid, ns, pod, container, resource, tuple(ids), Source(source))
        for (uid, ns, pod, container, resource, source), ids in grouped.items()
    )


# --- to the schema's shape ----------------------------------------------------------------------


def _status(report: NodeReport) -> dict[str, Any]:
    return {
        "agentVersion": report.agent_version,
        "gpuCount": len(report.gpus),
        "allocationCount": sum(len(a.device_ids) for a in report.allocations),
        "gpus": [_gpu_dict(g) for g in report.gpus],
        "allocations": [_allocation_dict(a) for a in report.allocations],
        "registered": _devices_dict(report.registered),
        "allocatable": _devices_dict(report.allocatable),
        "findings": [_finding_dict(f) for f in report.findings],
    }


def _gpu_dict(gpu: InventoryGpu) -> dict[str, Any]:
    return {
        "index": gpu.index,
        "uuid": gpu.uuid,
        "model": gpu.model,
        "minor": gpu.minor,
        "memoryMiB": gpu.memory_mib,
        "migMode": gpu.mig_mode,
        "migDevices": [
            {
                "uuid": m.uuid,
                "profile": m.profile,
                "gpuInstance": m.gi,
                "computeInstance": m.ci,
                "placement": dataclasses.asdict(m.placement) if m.placement else None,
            }
            for m in gpu.mig_devices
        ],
    }


def _allocation_dict(a: Allocation) -> dict[str, Any]:
    return {
        "podUID": a.pod_uid,
        "namespace": a.namespace,
        "pod": a.pod,
        "container": a.container,
        "resource": a.resource,
        "deviceIDs": list(a.device_ids),
        "source": a.source.value,
    }


def _devices_dict(devices: RegisteredDevices | None) -> dict[str, Any] | None:
    if devices is None:
        return None
    return {
        "source": devices.source.value,
        "resources": [
            {"resource": r.resource, "deviceIDs": list(r.device_ids)} for r in devices.resources
        ],
    }


def _finding_dict(f: Finding) -> dict[str, Any]:
    return {
        "severity": f.severity.value,
        "code": f.code,
        "message": f.message,
        "hint": f.hint or None,
    }


# --- from the schema's shape (what the API server returns) ---------------------------------------


def from_dict(obj: Mapping[str, Any]) -> NodeReport:
    """A report from its object (`spec`, `status`; metadata ignored). Raises `ReportError`."""
    spec, status = _object(obj, "spec"), _object(obj, "status")
    try:
        return NodeReport(
            node=_text(spec, "node"),
            agent_version=_text(status, "agentVersion"),
            generated_at=_text(status, "generatedAt"),
            gpus=_each(status, "gpus", _gpu),
            allocations=_each(status, "allocations", _allocation),
            registered=_devices(status.get("registered")),
            allocatable=_devices(status.get("allocatable")),
            findings=_each(status, "findings", _finding),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ReportError(f"the report does not have the v1 shape: {e}") from e


def _each(status: Mapping[str, Any], key: str, parse: Callable[[Any], T]) -> tuple[T, ...]:
    """Every entry of the list `status.<key>`, each an object: an entry of another type is
    named with its place (`status.gpus[0] is not an object`), never a crash."""
    parsed: list[T] = []
    for i, entry in enumerate(_list(status, key)):
        if not isinstance(entry, Mapping):
            raise ReportError(f"the report's status.{key}[{i}] is not an object")
        try:
            parsed.append(parse(entry))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ReportError(f"the report's status.{key}[{i}] cannot be read: {e}") from e
    return tuple(parsed)


def _object(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if not isinstance(value, Mapping):
        raise ReportError(f"the report has no `{key}` object")
    return value


def _text(obj: Mapping[str, Any], key: str) -> str:
    value = obj[key]
    if not isinstance(value, str):
        raise TypeError(f"`{key}` is not a string")
    return value


def _list(obj: Mapping[str, Any], key: str) -> list[Any]:
    value = obj.get(key) or []
    if not isinstance(value, list):
        raise TypeError(f"`{key}` is not a list")
    return value


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _optional_text(value: Any) -> str | None:
    return None if value is None else str(value)


def _gpu(g: Mapping[str, Any]) -> InventoryGpu:
    return InventoryGpu(
        index=_optional_int(g.get("index")),
        uuid=_text(g, "uuid"),
        model=_optional_text(g.get("model")),
        minor=_optional_int(g.get("minor")),
        memory_mib=_optional_int(g.get("memoryMiB")),
        mig_mode=_optional_text(g.get("migMode")),
        mig_devices=tuple(_mig(m) for m in _list(g, "migDevices")),
    )


def _mig(m: Mapping[str, Any]) -> MigInstance:
    placement = m.get("placement")
    return MigInstance(
        uuid=_text(m, "uuid"),
        profile=_optional_text(m.get("profile")),
        gi=_optional_int(m.get("gpuInstance")),
        ci=_optional_int(m.get("computeInstance")),
        placement=Placement(int(placement["start"]), int(placement["size"])) if placement else None,
    )


def _allocation(a: Mapping[str, Any]) -> Allocation:
    return Allocation(
        pod_uid=_optional_text(a.get("podUID")),
        namespace=_optional_text(a.get("namespace")),
        pod=_optional_text(a.get("pod")),
        container=_text(a, "container"),
        resource=_text(a, "resource"),
        device_ids=tuple(str(i) for i in _list(a, "deviceIDs")),
        source=Source(a["source"]),
    )


def _devices(value: Any) -> RegisteredDevices | None:
    if value is None:
        return None
    resources = tuple(
        ResourceDevices(_text(r, "resource"), tuple(str(i) for i in _list(r, "deviceIDs")))
        for r in _list(value, "resources")
    )
    return RegisteredDevices(resources, Source(value["source"]))


def _finding(f: Mapping[str, Any]) -> Finding:
    make = findings.error if f.get("severity") == "error" else findings.warning
    return make((), _text(f, "code"), _text(f, "message"), _optional_text(f.get("hint")) or "")
