"""Kubelet stand-in: a temporary kubelet root holding the device-manager checkpoint and a live
PodResources v1 gRPC server on ``<root>/pod-resources/kubelet.sock``.

Owns: the plain-data description of a node's pods, devices and allocatable resources; writing
``device-plugins/kubelet_internal_checkpoint`` in kubelet's JSON (current and pre-1.20 formats);
encoding ``AllocResp`` with a hand-written protobuf encoder (independent of the generated stubs the
product decodes with); serving List, GetAllocatableResources and Get over a real ``grpc.server``.

Must not: be imported by product code, or patch ``grpc``: the product's real client talks to a real
server over a real unix socket (docs/architecture.md, "Stand-ins"). Facts follow
docs/upstream-facts.md N1–N3.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import grpc

from kubectl_gpu._proto.podresources.v1 import api_pb2, api_pb2_grpc

NO_TOPOLOGY = -1  # kubelet's nodeWithoutTopology: the plugin reported no NUMA node
SOCKET_PATH_MAX = 107  # AF_UNIX sun_path is 108 bytes including the terminating NUL
CheckpointFormat = Literal["current", "pre-1.20"]
CorruptKind = Literal["truncated", "not-json", "wrong-shape"]


# --- plain data ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Devices:
    """Device IDs of one resource as the plugin advertised them (``GPU-…::N``, ``MIG-…``)."""

    resource: str
    ids: tuple[str, ...]
    numa_nodes: tuple[int, ...] = ()  # empty: the plugin reported no topology


@dataclass(frozen=True)
class Memory:
    """One memory-manager block (``memory_type`` e.g. ``memory`` or ``hugepages-1Gi``)."""

    memory_type: str
    size: int
    numa_nodes: tuple[int, ...] = ()


@dataclass(frozen=True)
class Mount:
    """A ContainerAllocateResponse mount."""

    container_path: str
    host_path: str
    read_only: bool = False


@dataclass(frozen=True)
class DeviceSpec:
    """A ContainerAllocateResponse device node (``permissions`` a subset of ``rwm``)."""

    container_path: str
    host_path: str
    permissions: str = "rw"


@dataclass(frozen=True)
class AllocateResponse:
    """What a device plugin told kubelet to inject; kubelet keeps it as ``AllocResp``."""

    envs: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()
    devices: tuple[DeviceSpec, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)
    cdi_devices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Claim:
    """A DRA ResourceClaim prepared for a container: PodResources `dynamic_resources` names it
    and each device as (driver, pool, device). Never in the device-plugin checkpoint."""

    name: str
    namespace: str
    devices: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True)
class Container:
    """A container and what kubelet allocated to it. ``alloc_resp``, if given, is stored for each
    of its resources; by default each gets NVIDIA's envvar strategy (``nvidia_envvar_response``)."""

    name: str
    devices: tuple[Devices, ...] = ()
    cpu_ids: tuple[int, ...] = ()
    memory: tuple[Memory, ...] = ()
    alloc_resp: AllocateResponse | None = None
    claims: tuple[Claim, ...] = ()


@dataclass(frozen=True)
class Pod:
    """A pod as PodResources sees it (name/namespace) and the checkpoint sees it (UID)."""

    name: str
    namespace: str
    containers: tuple[Container, ...]
    uid: str = ""  # empty: a stable UUID derived from namespace/name
    cpu_ids: tuple[int, ...] = ()  # pod-level fields 4 and 5 (1.37 development cycle)
    memory: tuple[Memory, ...] = ()

    @property
    def pod_uid(self) -> str:
        """The UID written to the checkpoint."""
        return self.uid or str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.namespace}/{self.name}"))


@dataclass(frozen=True)
class Allocatable:
    """What GetAllocatableResources reports; kubelet lists healthy devices only."""

    devices: tuple[Devices, ...] = ()
    cpu_ids: tuple[int, ...] = ()
    memory: tuple[Memory, ...] = ()


@dataclass(frozen=True)
class CheckpointEntry:
    """One ``PodDeviceEntries`` item: a (pod UID, container, resource) allocation."""

    pod_uid: str
    container: str
    resource: str
    ids_by_numa: Mapping[int, tuple[str, ...]]
    alloc_resp: bytes


# --- AllocResp: a hand-written protobuf encoder (wire types 0 and 2 only) ------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _string(number: int, text: str) -> bytes:
    # proto3 leaves fields at their default value off the wire
    return _length_delimited(number, text.encode()) if text else b""


def _bool(number: int, value: bool) -> bytes:
    return _varint(number << 3) + b"\x01" if value else b""


def _map(number: int, mapping: Mapping[str, str]) -> bytes:
    # a map is a repeated entry message {key = 1, value = 2}
    entries = (_string(1, key) + _string(2, value) for key, value in sorted(mapping.items()))
    return b"".join(_length_delimited(number, entry) for entry in entries)


def encode_alloc_resp(response: AllocateResponse) -> bytes:
    """Encode a v1beta1 ContainerAllocateResponse (docs/upstream-facts.md N2 field numbers)."""
    mounts = (
        _string(1, m.container_path) + _string(2, m.host_path) + _bool(3, m.read_only)
        for m in response.mounts
    )
    specs = (
        _string(1, d.container_path) + _string(2, d.host_path) + _string(3, d.permissions)
        for d in response.devices
    )
    return b"".join(
        [
            _map(1, response.envs),
            b"".join(_length_delimited(2, mount) for mount in mounts),
            b"".join(_length_delimited(3, spec) for spec in specs),
            _map(4, response.annotations),
            b"".join(_length_delimited(5, _string(1, name)) for name in response.cdi_devices),
        ]
    )


def nvidia_envvar_response(device_ids: Iterable[str]) -> AllocateResponse:
    """NVIDIA's plugin (envvar strategy): physical IDs, replica suffix removed, comma-joined."""
    physical = dict.fromkeys(device_id.split("::", 1)[0] for device_id in device_ids)
    return AllocateResponse(envs={"NVIDIA_VISIBLE_DEVICES": ",".join(physical)})


# --- checkpoint ----------------------------------------------------------------------------------


def checkpoint_entries(pods: Iterable[Pod]) -> list[CheckpointEntry]:
    """Derive kubelet's entries from pods: one per container and resource, a device listed under
    every NUMA node of its topology, or under -1 without one (docs/upstream-facts.md N1.2). Each
    resource's plugin answers Allocate for its own devices only, so the default AllocResp is per
    entry."""
    entries = []
    for pod in pods:
        for container in pod.containers:
            for group in container.devices:
                numa = group.numa_nodes or (NO_TOPOLOGY,)
                response = container.alloc_resp or nvidia_envvar_response(group.ids)
                entry = CheckpointEntry(
                    pod_uid=pod.pod_uid,
                    container=container.name,
                    resource=group.resource,
                    ids_by_numa={node: group.ids for node in numa},
                    alloc_resp=encode_alloc_resp(response),
                )
                entries.append(entry)
    return entries


def registered_devices(allocatable: Allocatable) -> dict[str, list[str]]:
    """``RegisteredDevices``: resource → healthy device IDs (the allocatable ones)."""
    registered: dict[str, list[str]] = {}
    for group in allocatable.devices:
        registered.setdefault(group.resource, []).extend(group.ids)
    return registered


def _entry_document(entry: CheckpointEntry, fmt: CheckpointFormat) -> dict[str, Any]:
    if fmt == "current":
        # encoding/json writes map keys sorted as strings
        device_ids: Any = {
            str(node): list(ids)
            for node, ids in sorted(entry.ids_by_numa.items(), key=lambda kv: str(kv[0]))
        }
    else:
        device_ids = list(dict.fromkeys(i for ids in entry.ids_by_numa.values() for i in ids))
    return {
        "PodUID": entry.pod_uid,
        "ContainerName": entry.container,
        "ResourceName": entry.resource,
        "DeviceIDs": device_ids,
        "AllocResp": base64.b64encode(entry.alloc_resp).decode(),
    }


def stand_in_checksum(data: Mapping[str, Any]) -> int:
    """FNV-32a over the compact JSON of ``Data``. NOT kubelet's checksum, which hashes Go's spew
    dump of the structs); readers must not verify it (docs/upstream-facts.md N1.6)."""
    value = 0x811C9DC5
    for byte in json.dumps(data, separators=(",", ":")).encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def checkpoint_document(
    entries: Sequence[CheckpointEntry],
    registered: Mapping[str, Sequence[str]],
    fmt: CheckpointFormat = "current",
) -> dict[str, Any]:
    """The checkpoint as kubelet marshals it: Go field names as keys, nil slice → null."""
    data = {
        "PodDeviceEntries": [_entry_document(e, fmt) for e in entries] or None,
        "RegisteredDevices": {name: list(ids) for name, ids in sorted(registered.items())},
    }
    return {"Data": data, "Checksum": stand_in_checksum(data)}


def checkpoint_text(document: Mapping[str, Any]) -> str:
    """Compact JSON, non-ASCII kept as UTF-8, as Go's encoding/json writes it."""
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


def write_atomically(path: Path, content: bytes) -> None:
    """Write as kubelet's FileStore does: a ``.``-prefixed temp file, fsync, rename over the
    target, so readers never see a partial file and bind-mounted files keep the old inode."""
    temp = path.with_name(f".{path.name}.tmp")
    with open(temp, "wb") as handle:
        handle.write(content)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


def corrupt_checkpoint_bytes(kind: CorruptKind, valid_text: str) -> bytes:
    """Damaged files: cut mid-write by a non-kubelet tool, not JSON, or JSON of the wrong shape."""
    if kind == "truncated":
        return valid_text.encode()[: max(1, len(valid_text) // 2)]
    if kind == "not-json":
        return b"\x00\xffkubelet_internal_checkpoint\x00"
    return json.dumps({"Data": {"PodDeviceEntries": "oops", "RegisteredDevices": []}}).encode()


# --- PodResources v1 messages --------------------------------------------------------------------


def _topology(numa_nodes: Sequence[int]) -> api_pb2.TopologyInfo:
    return api_pb2.TopologyInfo(nodes=[api_pb2.NUMANode(ID=node) for node in numa_nodes])


def container_devices(group: Devices) -> list[api_pb2.ContainerDevices]:
    """kubelet reports one ContainerDevices per device ID and NUMA node, with no topology at all
    when the plugin gave none (kubelet's containerDevicesFromResourceDeviceInstances)."""
    if not group.numa_nodes:
        return [
            api_pb2.ContainerDevices(resource_name=group.resource, device_ids=[i])
            for i in group.ids
        ]
    return [
        api_pb2.ContainerDevices(
            resource_name=group.resource, device_ids=[i], topology=_topology([node])
        )
        for i in group.ids
        for node in group.numa_nodes
    ]


def _memory(blocks: Sequence[Memory]) -> list[api_pb2.ContainerMemory]:
    return [
        api_pb2.ContainerMemory(
            memory_type=b.memory_type,
            size=b.size,
            topology=_topology(b.numa_nodes) if b.numa_nodes else None,
        )
        for b in blocks
    ]


def _dynamic(claim: Claim) -> api_pb2.DynamicResource:
    return api_pb2.DynamicResource(
        claim_name=claim.name,
        claim_namespace=claim.namespace,
        claim_resources=[
            api_pb2.ClaimResource(driver_name=d, pool_name=p, device_name=n)
            for d, p, n in claim.devices
        ],
    )


def pod_message(pod: Pod) -> api_pb2.PodResources:
    """One pod as List and Get return it."""
    containers = [
        api_pb2.ContainerResources(
            name=c.name,
            devices=[d for group in c.devices for d in container_devices(group)],
            cpu_ids=c.cpu_ids,
            memory=_memory(c.memory),
            dynamic_resources=[_dynamic(claim) for claim in c.claims],
        )
        for c in pod.containers
    ]
    return api_pb2.PodResources(
        name=pod.name,
        namespace=pod.namespace,
        containers=containers,
        cpu_ids=pod.cpu_ids,
        memory=_memory(pod.memory),
    )


# --- the server ----------------------------------------------------------------------------------


class _NodeState:
    """What the servicer answers from; replaced wholesale under a lock by the test thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pods: tuple[Pod, ...] = ()
        self.allocatable = Allocatable()
        self.get_enabled = True
        self.calls: list[str] = []


class _PodResourcesServicer(api_pb2_grpc.PodResourcesListerServicer):
    """The three v1 RPCs (method names are the RPC names, hence CamelCase)."""

    def __init__(self, state: _NodeState) -> None:
        self._state = state

    def _record(self, method: str) -> tuple[tuple[Pod, ...], Allocatable, bool]:
        with self._state.lock:
            self._state.calls.append(method)
            return self._state.pods, self._state.allocatable, self._state.get_enabled

    def List(
        self, request: api_pb2.ListPodResourcesRequest, context: grpc.ServicerContext
    ) -> api_pb2.ListPodResourcesResponse:
        pods, _, _ = self._record("List")
        return api_pb2.ListPodResourcesResponse(pod_resources=[pod_message(p) for p in pods])

    def GetAllocatableResources(
        self, request: api_pb2.AllocatableResourcesRequest, context: grpc.ServicerContext
    ) -> api_pb2.AllocatableResourcesResponse:
        _, allocatable, _ = self._record("GetAllocatableResources")
        return api_pb2.AllocatableResourcesResponse(
            devices=[d for group in allocatable.devices for d in container_devices(group)],
            cpu_ids=allocatable.cpu_ids,
            memory=_memory(allocatable.memory),
        )

    def Get(
        self, request: api_pb2.GetPodResourcesRequest, context: grpc.ServicerContext
    ) -> api_pb2.GetPodResourcesResponse:
        pods, _, get_enabled = self._record("Get")
        # kubelet returns plain Go errors here, which grpc-go sends as code UNKNOWN
        if not get_enabled:
            context.abort(grpc.StatusCode.UNKNOWN, "PodResources API Get method disabled")
        for pod in pods:
            if (pod.name, pod.namespace) == (request.pod_name, request.pod_namespace):
                return api_pb2.GetPodResourcesResponse(pod_resources=pod_message(pod))
        message = f"pod {request.pod_name} in namespace {request.pod_namespace} not found"
        context.abort(grpc.StatusCode.UNKNOWN, message)
        raise AssertionError("unreachable: abort raises")


class FakeKubelet:
    """A kubelet root with a PodResources server; the fixture is in ``kubelet_fixture.py``."""

    def __init__(self, root: Path, workers: int = 2) -> None:
        self.root = root
        self.socket_path = root / "pod-resources" / "kubelet.sock"
        self.checkpoint_path = root / "device-plugins" / "kubelet_internal_checkpoint"
        if len(os.fsencode(self.socket_path)) > SOCKET_PATH_MAX:
            raise ValueError(f"socket path longer than {SOCKET_PATH_MAX} bytes: {self.socket_path}")
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        self.checkpoint_path.parent.mkdir(parents=True, exist_ok=True)
        self._workers = workers
        self._state = _NodeState()
        self._server: grpc.Server | None = None
        self._executor: futures.ThreadPoolExecutor | None = None

    @property
    def target(self) -> str:
        """The gRPC target a client dials (``unix:///…/kubelet.sock``)."""
        return f"unix://{self.socket_path}"

    @property
    def calls(self) -> tuple[str, ...]:
        """Method names served so far, in order."""
        with self._state.lock:
            return tuple(self._state.calls)

    def start(self) -> None:
        """Serve on a fresh socket file; a stale one is removed first, as kubelet does."""
        if self._server is not None:
            return
        self.socket_path.unlink(missing_ok=True)
        self._executor = futures.ThreadPoolExecutor(max_workers=self._workers)
        server = grpc.server(self._executor)
        api_pb2_grpc.add_PodResourcesListerServicer_to_server(
            _PodResourcesServicer(self._state), server
        )
        server.add_insecure_port(f"unix:{self.socket_path}")
        server.start()
        self._server = server

    def stop(self) -> None:
        """Stop serving, join the worker threads and remove the socket file."""
        if self._server is not None:
            self._server.stop(grace=None).wait()
            self._server = None
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        self.socket_path.unlink(missing_ok=True)

    def restart(self) -> None:
        """A kubelet restart: the socket file is replaced by a new one in the same directory."""
        self.stop()
        self.start()

    def set_pods(self, pods: Iterable[Pod]) -> None:
        """Replace the pods (and so the allocations) List and Get report."""
        with self._state.lock:
            self._state.pods = tuple(pods)

    def set_allocatable(self, allocatable: Allocatable) -> None:
        """Replace what GetAllocatableResources reports (healthy devices only)."""
        with self._state.lock:
            self._state.allocatable = allocatable

    def set_get_enabled(self, enabled: bool) -> None:
        """Model the KubeletPodResourcesGet gate (off by default before 1.34)."""
        with self._state.lock:
            self._state.get_enabled = enabled

    def write_checkpoint(
        self,
        fmt: CheckpointFormat = "current",
        entries: Sequence[CheckpointEntry] | None = None,
        registered: Mapping[str, Sequence[str]] | None = None,
    ) -> Path:
        """Write the checkpoint, by default derived from the current pods and allocatable."""
        with self._state.lock:
            pods, allocatable = self._state.pods, self._state.allocatable
        document = checkpoint_document(
            checkpoint_entries(pods) if entries is None else entries,
            registered_devices(allocatable) if registered is None else registered,
            fmt,
        )
        write_atomically(self.checkpoint_path, checkpoint_text(document).encode())
        return self.checkpoint_path

    def write_checkpoint_file(self, source: Path) -> Path:
        """Install a checkpoint file as is (e.g. from tests/data/checkpoints/)."""
        write_atomically(self.checkpoint_path, source.read_bytes())
        return self.checkpoint_path

    def write_corrupt_checkpoint(self, kind: CorruptKind = "truncated") -> Path:
        """Write a damaged checkpoint file."""
        with self._state.lock:
            pods = self._state.pods
        valid = checkpoint_text(checkpoint_document(checkpoint_entries(pods), {}))
        write_atomically(self.checkpoint_path, corrupt_checkpoint_bytes(kind, valid))
        return self.checkpoint_path

    def remove_checkpoint(self) -> None:
        """No checkpoint: the node has never allocated a device."""
        self.checkpoint_path.unlink(missing_ok=True)


# --- sample nodes: tests/data/checkpoints/ is generated from these (see its README.md) -----------

NodeScenario = tuple[tuple[Pod, ...], Allocatable]


def time_sliced_node() -> NodeScenario:
    """One A10G on NUMA node 0 shared by time-slicing, replicas 4; a notebook holds two replicas."""
    gpu = "GPU-4f2c7e1a-9b3d-4c8e-a1f0-6d5b2e8c9a17"
    replica = [f"{gpu}::{n}" for n in range(4)]

    def one(name: str, uid: str, ids: tuple[str, ...]) -> Pod:
        devices = (Devices("nvidia.com/gpu", ids, numa_nodes=(0,)),)
        return Pod(name, "ml", (Container("main", devices),), uid=uid)

    pods = (
        one("llm-a-7d9f8b6c5-x2k4q", "0b8e3c52-6f1d-4a7e-9c24-8d5f1e3a7b90", (replica[0],)),
        one("llm-b-7d9f8b6c5-m7p2z", "5c1a9e47-2b8d-4f63-a0e5-3e9b7c2d1f48", (replica[1],)),
        one("notebook-0", "a7d4f2e1-8c3b-4e59-b6a0-1f2e9d8c7b65", (replica[2], replica[3])),
    )
    allocatable = Allocatable(devices=(Devices("nvidia.com/gpu", tuple(replica), (0,)),))
    return pods, allocatable


def pre_1_20_node() -> NodeScenario:
    """A Kubernetes 1.19 node with two Tesla T4s, each held by one training pod."""
    gpus = ("GPU-8a1d5c3e-2f7b-4d9a-b6e4-0c3f9a2d7e15", "GPU-e3b9f1a7-6c2d-4e8b-9a5f-7d1c4b8e2a63")

    def one(name: str, uid: str, gpu: str) -> Pod:
        devices = (Devices("nvidia.com/gpu", (gpu,)),)
        return Pod(name, "default", (Container("trainer", devices),), uid=uid)

    pods = (
        one("resnet-train-0", "6e2f8a14-3b7c-11eb-9d5e-0242ac110002", gpus[0]),
        one("resnet-train-1", "6e31c9a2-3b7c-11eb-9d5e-0242ac110002", gpus[1]),
    )
    return pods, Allocatable(devices=(Devices("nvidia.com/gpu", gpus),))


SAMPLES: dict[str, tuple[NodeScenario, CheckpointFormat]] = {
    "time-sliced-4x.json": (time_sliced_node(), "current"),
    "pre-1.20-2gpu.json": (pre_1_20_node(), "pre-1.20"),
}


def sample_text(name: str) -> str:
    """The checkpoint text of one sample, byte for byte as written to tests/data/checkpoints/."""
    (pods, allocatable), fmt = SAMPLES[name]
    entries = checkpoint_entries(pods)
    return checkpoint_text(checkpoint_document(entries, registered_devices(allocatable), fmt))


def write_samples(folder: Path) -> None:
    """Regenerate the sample checkpoint files in ``folder``."""
    for name in SAMPLES:
        (folder / name).write_text(sample_text(name), encoding="utf-8")
