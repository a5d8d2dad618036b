"""kubelet's node-local state: the device-manager checkpoint and the PodResources API.

The only module that imports `grpc` (and it does so only inside the PodResources calls, so
reading a checkpoint never loads it). Owns: where the state lives under a kubelet root;
reading `kubelet_internal_checkpoint` leniently (current and pre-1.20 formats, `null`
entries, NUMA key `-1`, IDs repeated under several NUMA nodes, unknown keys; the checksum is
not verified, docs/upstream-facts.md N1.6) with `AllocResp` decoded by the generated
`allocate_pb2`; PodResources v1 `List`, `GetAllocatableResources` and `Get` over
`unix://…/kubelet.sock`; turning both into `gpumap.allocations` values, and every
`grpc.RpcError` into a `KubeletError`. A damaged checkpoint is a warning, never an error,
as kubelet itself fails open on it (docs/upstream-facts.md N1.5). Must not decide anything about
GPUs: an `if` here is about the file format or the protocol, never about policy.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from kubectl_gpu.errors import KubeletError
from kubectl_gpu.gpumap.allocations import (
    AllocateResponse,
    Allocation,
    DeviceSpec,
    Mount,
    RegisteredDevices,
    Source,
    group_devices,
    sorted_pairs,
)

log = logging.getLogger(__name__)

DEFAULT_ROOT = Path("/var/lib/kubelet")
# Relative to the kubelet root. Mount the two directories, not the file or the socket: kubelet
# replaces both by new files (rename, re-create), which a bind-mounted file never sees
# (docs/upstream-facts.md N1.1).
CHECKPOINT_FILE = Path("device-plugins") / "kubelet_internal_checkpoint"
PODRESOURCES_SOCKET = Path("pod-resources") / "kubelet.sock"
MAX_CHECKPOINT_BYTES = 16 * 1024 * 1024  # about 50,000 entries; a node holds far fewer
DEFAULT_TIMEOUT = 10.0  # seconds; dcgm-exporter uses the same for List
CHECKSUM_NOTE = (
    "{name}: checksum not verified (kubelet hashes Go's spew dump of the data, "
    "which kubectl-gpu does not reproduce)"
)
Decoder = Callable[[bytes], AllocateResponse]


def checkpoint_path(root: Path = DEFAULT_ROOT) -> Path:
    """`<root>/device-plugins/kubelet_internal_checkpoint`."""
    return root / CHECKPOINT_FILE


def socket_path(root: Path = DEFAULT_ROOT) -> Path:
    """`<root>/pod-resources/kubelet.sock`."""
    return root / PODRESOURCES_SOCKET


# --- the checkpoint ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CheckpointContents:
    """What a checkpoint says. `readable` is False when nothing could be read (then `warnings`
    names the file and the error); `registered` is None when `RegisteredDevices` was unusable."""

    allocations: tuple[Allocation, ...]
    registered: RegisteredDevices | None
    warnings: tuple[str, ...]
    readable: bool = True


def read_checkpoint(path: Path) -> CheckpointContents:
    """Read a checkpoint file; a missing, unreadable or damaged file is a warning, not an error."""
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_CHECKPOINT_BYTES + 1)
    except FileNotFoundError:
        return _unreadable(str(path), "no such file (kubelet writes it at the first allocation)")
    except OSError as e:
        return _unreadable(str(path), e.strerror or str(e))
    return parse_checkpoint(data, str(path))


def parse_checkpoint(data: bytes, name: str) -> CheckpointContents:
    """Parse checkpoint bytes read elsewhere (stdin); `name` is how warnings refer to them."""
    if len(data) > MAX_CHECKPOINT_BYTES:
        return _unreadable(name, f"larger than {MAX_CHECKPOINT_BYTES // 2**20} MiB")
    try:
        document = json.loads(data)
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError both are
        return _unreadable(name, f"not JSON: {e}")
    except RecursionError:  # kubelet's own file nests 4 levels deep
        return _unreadable(name, "not kubelet's format: the JSON nests too deeply to read")
    problem = _shape_problem(document)
    if problem:
        return _unreadable(name, problem)
    warnings: list[str] = []
    entries = document["Data"].get("PodDeviceEntries") or []
    # protobuf is imported only for a file that records AllocResp (kubelet >= 1.20 does)
    recorded = any(isinstance(e, dict) and e.get("AllocResp") is not None for e in entries)
    decode = _decoder(name, warnings) if recorded else None
    allocations = [_entry(e, i, name, decode, warnings) for i, e in enumerate(entries)]
    registered = _registered(document["Data"].get("RegisteredDevices"), name, warnings)
    log.info(CHECKSUM_NOTE.format(name=name))
    return CheckpointContents(tuple(a for a in allocations if a), registered, tuple(warnings))


def _unreadable(name: str, problem: str) -> CheckpointContents:
    warning = f"cannot read kubelet's checkpoint {name}: {problem}"
    return CheckpointContents((), None, (warning,), readable=False)


def _shape_problem(document: Any) -> str:
    """What kubelet's own unmarshalling would reject outright (it then reads nothing,
    docs/upstream-facts.md N1.5)."""
    if not isinstance(document, dict):
        return f"the document is a JSON {type(document).__name__}, not an object"
    data = document.get("Data")
    if not isinstance(data, dict):
        return "it has no `Data` object"
    entries = data.get("PodDeviceEntries")
    if entries is not None and not isinstance(entries, list):
        return f"`Data.PodDeviceEntries` is a JSON {type(entries).__name__}, not a list"
    return ""


def _entry(
    raw: Any, index: int, name: str, decode: Decoder | None, warnings: list[str]
) -> Allocation | None:
    if not isinstance(raw, dict):
        warnings.append(f"{name}: PodDeviceEntries[{index}]: not an object; skipped")
        return None
    uid, container, resource = raw.get("PodUID"), raw.get("ContainerName"), raw.get("ResourceName")
    device_ids = _device_ids(raw.get("DeviceIDs"))
    if (
        not isinstance(uid, str)
        or not isinstance(container, str)
        or not isinstance(resource, str)
        or device_ids is None
    ):
        warnings.append(
            f"{name}: PodDeviceEntries[{index}]: PodUID, ContainerName, ResourceName or "
            "DeviceIDs unusable; skipped"
        )
        return None
    response = None
    if decode is not None and raw.get("AllocResp") is not None:  # the place named only then
        where = f"{name}: PodDeviceEntries[{index}]"
        response = _alloc_resp(raw["AllocResp"], decode, where, warnings)
    return Allocation(uid, None, None, container, resource, device_ids, Source.CHECKPOINT, response)


def _device_ids(raw: Any) -> tuple[str, ...] | None:
    """A flat list before 1.20; since then NUMA node → IDs, an ID listed under every NUMA node
    of its topology (`-1`: none). None when the value has neither shape."""
    if raw is None:
        return ()
    if isinstance(raw, dict):
        lists = [raw[k] for k in sorted(raw, key=_numa_order)]
        raw = [i for ids in lists if isinstance(ids, list) for i in ids]
    if not isinstance(raw, list) or not all(isinstance(i, str) for i in raw):
        return None
    return tuple(raw) if len(raw) < 2 else tuple(dict.fromkeys(raw))


def _numa_order(key: str) -> tuple[int, str]:
    try:
        return int(key), ""
    except ValueError:
        return 2**63, key


def _alloc_resp(
    raw: Any, decode: Decoder, where: str, warnings: list[str]
) -> AllocateResponse | None:
    try:
        return decode(base64.b64decode(str(raw), validate=True))
    except ValueError as e:  # binascii.Error, or the decoder's
        warnings.append(f"{where}: AllocResp not decoded: {e}")
    return None


def _registered(raw: Any, name: str, warnings: list[str]) -> RegisteredDevices | None:
    if raw is None:
        return group_devices((), Source.CHECKPOINT)
    if not isinstance(raw, dict):
        warnings.append(f"{name}: Data.RegisteredDevices is not an object; ignored")
        return None
    pairs = [
        (resource, device_id)
        for resource, ids in raw.items()
        for device_id in (ids if isinstance(ids, list) else [])
        if isinstance(device_id, str)
    ]
    return group_devices(pairs, Source.CHECKPOINT)


def _decoder(name: str, warnings: list[str]) -> Decoder | None:
    """The generated ContainerAllocateResponse, or None (with a warning) without protobuf."""
    try:
        from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

        from kubectl_gpu._proto.deviceplugin.v1beta1 import allocate_pb2
    except Exception as e:  # ImportError, or the stubs' protobuf VersionError
        warnings.append(f"{name}: AllocResp not decoded ({e}); install kubectl-gpu[agent]")
        return None

    def decode(data: bytes) -> AllocateResponse:
        message = allocate_pb2.ContainerAllocateResponse()
        try:
            message.ParseFromString(data)
        except DecodeError as e:
            raise ValueError(f"not a ContainerAllocateResponse ({e})") from e
        return _response(message)

    return decode


def _response(message: Any) -> AllocateResponse:
    return AllocateResponse(
        envs=sorted_pairs(message.envs),
        mounts=tuple(Mount(m.container_path, m.host_path, m.read_only) for m in message.mounts),
        devices=tuple(
            DeviceSpec(d.container_path, d.host_path, d.permissions) for d in message.devices
        ),
        annotations=sorted_pairs(message.annotations),
        cdi_devices=tuple(c.name for c in message.cdi_devices),
    )


# --- PodResources v1 -----------------------------------------------------------------------------


def list_pod_resources(socket: Path, timeout: float = DEFAULT_TIMEOUT) -> tuple[Allocation, ...]:
    """`List`: every pod kubelet runs that holds resources, with its containers' devices."""
    from kubectl_gpu._proto.podresources.v1 import api_pb2

    response = _call(socket, "List", api_pb2.ListPodResourcesRequest(), timeout)
    return allocations_from_pods(response.pod_resources)


def allocatable_resources(socket: Path, timeout: float = DEFAULT_TIMEOUT) -> RegisteredDevices:
    """`GetAllocatableResources`: the devices kubelet can allocate now (healthy ones only)."""
    from kubectl_gpu._proto.podresources.v1 import api_pb2

    request = api_pb2.AllocatableResourcesRequest()
    response = _call(socket, "GetAllocatableResources", request, timeout)
    pairs = ((d.resource_name, i) for d in response.devices for i in d.device_ids)
    return group_devices(pairs, Source.PODRESOURCES)


def get_pod_resources(
    socket: Path, namespace: str, name: str, timeout: float = DEFAULT_TIMEOUT
) -> tuple[Allocation, ...]:
    """`Get` (GA in 1.36): one pod's allocations."""
    from kubectl_gpu._proto.podresources.v1 import api_pb2

    request = api_pb2.GetPodResourcesRequest(pod_name=name, pod_namespace=namespace)
    response = _call(socket, "Get", request, timeout)
    return allocations_from_pods([response.pod_resources])


def allocations_from_pods(pods: Iterable[Any]) -> tuple[Allocation, ...]:
    """PodResources messages → allocations. kubelet sends one ContainerDevices per device and
    NUMA node, so a container's IDs are collected per resource without repeats."""
    return tuple(a for pod in pods for c in pod.containers for a in _container(pod, c))


def _container(pod: Any, container: Any) -> Iterator[Allocation]:
    by_resource: dict[str, dict[str, None]] = {}
    for devices in container.devices:
        by_resource.setdefault(devices.resource_name, {}).update(dict.fromkeys(devices.device_ids))
    for resource, ids in by_resource.items():
        yield Allocation(
            None, pod.namespace, pod.name, container.name, resource, tuple(ids), Source.PODRESOURCES
        )
    for claim in container.dynamic_resources:
        # DRA names a device <driver>/<pool>/<device>, as pod status resourceID does
        # (docs/upstream-facts.md N5.3)
        claimed = tuple(
            f"{r.driver_name}/{r.pool_name}/{r.device_name}" for r in claim.claim_resources
        )
        resource = f"claim:{claim.claim_name}"
        yield Allocation(
            None, pod.namespace, pod.name, container.name, resource, claimed, Source.DRA
        )


def _call(socket: Path, method: str, request: Any, timeout: float) -> Any:
    import grpc

    from kubectl_gpu._proto.podresources.v1 import api_pb2_grpc

    # A fresh channel per call: after a kubelet restart the socket is a new file
    # (docs/upstream-facts.md N1.1)
    target = f"unix://{os.path.abspath(socket)}"
    try:
        with grpc.insecure_channel(target) as channel:
            stub = api_pb2_grpc.PodResourcesListerStub(channel)
            return getattr(stub, method)(request, timeout=timeout)
    except grpc.RpcError as e:
        raise _kubelet_error(socket, method, e, timeout) from e


def _kubelet_error(socket: Path, method: str, error: Any, timeout: float) -> KubeletError:
    code = error.code()
    name = getattr(code, "name", str(code))
    details = error.details() or ""
    message = f"kubelet's PodResources {method} on {socket} failed: {name}: {details}"
    hint = _HINTS.get(name, "").format(timeout=timeout, method=method)
    if method == "Get" and name == "UNKNOWN" and "not found" in details:
        # kubelet answers an unknown pod with a plain error, which gRPC sends as UNKNOWN
        hint = "the pod does not run on this node"
    return KubeletError(message, hint=hint)


_HINTS = {
    "UNAVAILABLE": (
        "is kubelet running, and is its pod-resources directory mounted (the directory, "
        "not the socket, so that a kubelet restart does not break it)?"
    ),
    "DEADLINE_EXCEEDED": "kubelet did not answer within {timeout:g} s",
    "RESOURCE_EXHAUSTED": "kubelet rate-limits PodResources (100 calls/s, burst 10); retry",
    "UNIMPLEMENTED": "this kubelet is too old for {method}",
    "PERMISSION_DENIED": "the socket is root's; run as root or fix the mount",
}
