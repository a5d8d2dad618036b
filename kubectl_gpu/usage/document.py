"""The `/v1/usage` document the agent serves and `kubectl gpu top` reads (docs/top.md).

Owns `NodeUsage` (one node's GPUs, MIG devices and compute processes with the pod each runs
in, and the devices kubelet has handed to each container), its JSON form
(`apiVersion: kubectl-gpu.io/v1`, `kind: GPUUsage`) and reading that form back strictly:
an answer of another version, or of the wrong shape, is a `UsageDocumentError` naming what
is wrong, never a traceback. Counts are bounded (`MAX_*`) so a hostile or broken answer
cannot make the CLI build millions of rows. The document never carries a command line, an
environment or anything else of a process but its PID, memory, SM % and cgroup's pod.
Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kubectl_gpu.keys import API_VERSION as API_VERSION  # one definition, in keys
from kubectl_gpu.usage.readings import GpuReading, MigReading, ProcessReading

KIND = "GPUUsage"
MAX_GPUS = 64
MAX_MIG_DEVICES = 64  # per GPU; an H100 has at most 7
MAX_PROCESSES = 4096  # per GPU
MAX_HELD = 16384  # device IDs handed out on one node (an 8-GPU node with 128 replicas each)
MAX_PROBLEMS = 64


class UsageDocumentError(ValueError):
    """An answer that is not a GPUUsage document of this version."""


@dataclasses.dataclass(frozen=True)
class Attributed:
    """A compute process with the pod (UID) and container (runtime ID) its cgroup names;
    both None for a process in no pod."""

    process: ProcessReading
    pod_uid: str | None = None
    container_id: str | None = None


@dataclasses.dataclass(frozen=True)
class Held:
    """One advertised device ID kubelet handed to a container (PodResources, the checkpoint,
    or a DRA claim), resolved to its physical GPU / MIG device; `replicas` is how many IDs
    the device plugin advertises for the same physical device (time-slicing or MPS)."""

    device_id: str
    resource: str
    source: str
    gpu_uuid: str | None
    mig_uuid: str | None
    replica: int | None
    replicas: int | None
    namespace: str | None
    pod: str | None
    pod_uid: str | None
    container: str | None


@dataclasses.dataclass(frozen=True)
class NodeUsage:
    """What one node's agent read on demand. `read_at` is RFC 3339 UTC."""

    node: str
    agent_version: str
    read_at: str
    gpus: tuple[GpuReading, ...]
    processes: tuple[tuple[str, Attributed], ...]  # (GPU UUID, process), GPU by GPU
    held: tuple[Held, ...]
    problems: tuple[str, ...] = ()

    def processes_on(self, gpu_uuid: str) -> tuple[Attributed, ...]:
        """The processes of one physical GPU."""
        return tuple(p for uuid, p in self.processes if uuid == gpu_uuid)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (docs/top.md)."""
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "node": self.node,
            "agentVersion": self.agent_version,
            "readAt": self.read_at,
            "gpus": [_gpu_dict(g, self.processes_on(g.uuid)) for g in self.gpus],
            "held": [_held_dict(h) for h in self.held],
            "problems": list(self.problems),
        }


def _gpu_dict(g: GpuReading, processes: tuple[Attributed, ...]) -> dict[str, Any]:
    return {
        "index": g.index,
        "uuid": g.uuid,
        "model": g.model,
        "memoryTotalBytes": g.memory_total,
        "memoryUsedBytes": g.memory_used,
        "smPercent": g.sm_percent,
        "smUnavailable": g.sm_unavailable,
        "migEnabled": g.mig_enabled,
        "migDevices": [
            {
                "uuid": m.uuid,
                "profile": m.profile,
                "gpuInstance": m.gpu_instance,
                "computeInstance": m.compute_instance,
                "memoryTotalBytes": m.memory_total,
                "memoryUsedBytes": m.memory_used,
                "placementStart": m.placement_start,
                "placementSize": m.placement_size,
            }
            for m in g.mig_devices
        ],
        "processes": [
            {
                "pid": a.process.pid,
                "usedMemoryBytes": a.process.used_memory,
                "gpuInstance": a.process.gpu_instance,
                "computeInstance": a.process.compute_instance,
                "smPercent": a.process.sm_percent,
                "smUnavailable": a.process.sm_unavailable,
                "podUID": a.pod_uid,
                "containerID": a.container_id,
            }
            for a in processes
        ],
    }


def _held_dict(h: Held) -> dict[str, Any]:
    return {
        "deviceID": h.device_id,
        "resource": h.resource,
        "source": h.source,
        "gpuUUID": h.gpu_uuid,
        "migUUID": h.mig_uuid,
        "replica": h.replica,
        "replicas": h.replicas,
        "namespace": h.namespace,
        "pod": h.pod,
        "podUID": h.pod_uid,
        "container": h.container,
    }


# --- reading it back -----------------------------------------------------------------------------


def from_dict(doc: Any) -> NodeUsage:
    """A document read back; `UsageDocumentError` when it is not a v1 GPUUsage."""
    if not isinstance(doc, Mapping):
        raise UsageDocumentError("the answer is not a JSON object")
    if doc.get("apiVersion") != API_VERSION or doc.get("kind") != KIND:
        raise UsageDocumentError(
            f"the answer is not a {API_VERSION} {KIND} (apiVersion {doc.get('apiVersion')!r}, "
            f"kind {doc.get('kind')!r}): is the agent a different version of kubectl-gpu?"
        )
    try:
        gpus = _bounded(doc, "gpus", MAX_GPUS)
        processes = tuple(
            (str(g["uuid"]), _attributed(p))
            for g in gpus
            for p in _bounded(g, "processes", MAX_PROCESSES)
        )
        return NodeUsage(
            node=_text(doc, "node"),
            agent_version=_text(doc, "agentVersion"),
            read_at=_text(doc, "readAt"),
            gpus=tuple(_gpu(g) for g in gpus),
            processes=processes,
            held=tuple(_held(h) for h in _bounded(doc, "held", MAX_HELD)),
            problems=tuple(str(p) for p in _bounded(doc, "problems", MAX_PROBLEMS)),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise UsageDocumentError(f"the answer does not have the {KIND} v1 shape: {e}") from e


def _bounded(obj: Mapping[str, Any], key: str, limit: int) -> list[Any]:
    value = obj.get(key) or []
    if not isinstance(value, list):
        raise TypeError(f"`{key}` is not a list")
    if len(value) > limit:
        raise ValueError(f"`{key}` has {len(value)} entries, more than the {limit} allowed")
    return value


def _text(obj: Mapping[str, Any], key: str) -> str:
    value = obj[key]
    if not isinstance(value, str):
        raise TypeError(f"`{key}` is not a string")
    return value


def _int(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{value!r} is not a whole number")
    if value < 0 or value > 2**63:
        raise ValueError(f"{value} is out of range")
    return value


def _opt(value: Any) -> str | None:
    return None if value is None else str(value)


def _gpu(g: Mapping[str, Any]) -> GpuReading:
    return GpuReading(
        index=_int(g.get("index")) or 0,
        uuid=_text(g, "uuid"),
        model=_opt(g.get("model")),
        memory_total=_int(g.get("memoryTotalBytes")),
        memory_used=_int(g.get("memoryUsedBytes")),
        sm_percent=_int(g.get("smPercent")),
        sm_unavailable=_opt(g.get("smUnavailable")),
        mig_enabled=bool(g.get("migEnabled")),
        mig_devices=tuple(_mig(m) for m in _bounded(g, "migDevices", MAX_MIG_DEVICES)),
    )


def _mig(m: Mapping[str, Any]) -> MigReading:
    return MigReading(
        uuid=_text(m, "uuid"),
        profile=_opt(m.get("profile")),
        gpu_instance=_int(m.get("gpuInstance")),
        compute_instance=_int(m.get("computeInstance")),
        memory_total=_int(m.get("memoryTotalBytes")),
        memory_used=_int(m.get("memoryUsedBytes")),
        placement_start=_int(m.get("placementStart")),
        placement_size=_int(m.get("placementSize")),
    )


def _attributed(p: Mapping[str, Any]) -> Attributed:
    process = ProcessReading(
        pid=_int(p["pid"]) or 0,
        used_memory=_int(p.get("usedMemoryBytes")),
        gpu_instance=_int(p.get("gpuInstance")),
        compute_instance=_int(p.get("computeInstance")),
        sm_percent=_int(p.get("smPercent")),
        sm_unavailable=_opt(p.get("smUnavailable")),
    )
    return Attributed(process, _opt(p.get("podUID")), _opt(p.get("containerID")))


def _held(h: Mapping[str, Any]) -> Held:
    return Held(
        device_id=_text(h, "deviceID"),
        resource=_text(h, "resource"),
        source=_text(h, "source"),
        gpu_uuid=_opt(h.get("gpuUUID")),
        mig_uuid=_opt(h.get("migUUID")),
        replica=_int(h.get("replica")),
        replicas=_int(h.get("replicas")),
        namespace=_opt(h.get("namespace")),
        pod=_opt(h.get("pod")),
        pod_uid=_opt(h.get("podUID")),
        container=_opt(h.get("container")),
    )
