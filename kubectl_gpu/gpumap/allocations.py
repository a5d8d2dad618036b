"""What the node-side sources say: allocations, registered devices, pods and physical GPUs.

Owns the frozen values the readers produce and the join consumes: an `Allocation` (one
container's devices of one resource, as kubelet's checkpoint or PodResources reports it,
with the plugin's `AllocateResponse` when known), `RegisteredDevices` (checkpoint
`RegisteredDevices` or PodResources `GetAllocatableResources`: healthy devices only), a
`PodRef` from a pod list, and the physical inventory (`Gpu`, `MigDevice`) NVML reports.
Also reads which devices an `AllocateResponse` made visible, following NVIDIA's plugin
conventions (docs/upstream-facts.md N1.4). Must not read files or sockets (the adapters
do). Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping
from typing import Any

from kubectl_gpu.errors import InputError

VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"
# NVIDIA's volume-mounts strategy: the env names this folder, one mount per device inside it
VOLUME_MOUNTS_ROOT = "/var/run/nvidia-container-devices"
CDI_ANNOTATION_PREFIX = "cdi.k8s.io/"
_NOT_DEVICE_LISTS = frozenset({"", "void", "none", "all"})  # nvidia-container-runtime keywords


class Source(str, enum.Enum):
    """Where an allocation or device list was read."""

    PODRESOURCES = "podresources"
    CHECKPOINT = "checkpoint"
    DRA = "dra"


@dataclasses.dataclass(frozen=True)
class Mount:
    """A mount the device plugin asked kubelet to add to the container."""

    container_path: str
    host_path: str
    read_only: bool = False


@dataclasses.dataclass(frozen=True)
class DeviceSpec:
    """A device node the device plugin asked kubelet to add (`permissions` ⊆ `rwm`)."""

    container_path: str
    host_path: str
    permissions: str = ""


@dataclasses.dataclass(frozen=True)
class AllocateResponse:
    """The plugin's ContainerAllocateResponse, as kubelet keeps it in the checkpoint's `AllocResp`.

    Maps are kept as sorted key/value pairs so that the value stays hashable.
    """

    envs: tuple[tuple[str, str], ...] = ()
    mounts: tuple[Mount, ...] = ()
    devices: tuple[DeviceSpec, ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    cdi_devices: tuple[str, ...] = ()

    def env(self, name: str) -> str | None:
        """The value of one injected environment variable, or None."""
        return dict(self.envs).get(name)

    def visible_devices(self) -> tuple[str, ...] | None:
        """The device IDs this response made visible, or None when it does not say.

        NVIDIA's plugin names them in `NVIDIA_VISIBLE_DEVICES` (envvar strategy), in mounts
        under `/var/run/nvidia-container-devices/` (volume-mounts), or as CDI device names
        `<vendor>/<class>=<id>` (CDI strategies). The IDs are UUIDs or indices, per the
        plugin's `deviceIDStrategy`.
        """
        found: list[str] = []
        value = self.env(VISIBLE_DEVICES_ENV)
        if value == VOLUME_MOUNTS_ROOT:
            found += [m.container_path.rsplit("/", 1)[1] for m in self.mounts if _mounted(m)]
        elif value is not None and value.strip().lower() not in _NOT_DEVICE_LISTS:
            found += _split(value)
        cdi_names = [v for k, v in self.annotations if k.startswith(CDI_ANNOTATION_PREFIX)]
        for name in [*cdi_names, *self.cdi_devices]:
            found += [part.split("=", 1)[1] for part in _split(name) if "=" in part]
        return tuple(dict.fromkeys(found)) or None


def _mounted(mount: Mount) -> bool:
    return mount.container_path.startswith(VOLUME_MOUNTS_ROOT + "/")


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def sorted_pairs(mapping: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """A map as the sorted pairs `AllocateResponse` keeps."""
    return tuple(sorted(mapping.items()))


@dataclasses.dataclass(frozen=True)
class Allocation:
    """One container's devices of one resource, as one source reports them.

    The checkpoint knows the pod by UID only; PodResources by namespace and name only
    (docs/upstream-facts.md N3), so whichever is missing is None until a pod list fills it in.
    `response` is the plugin's AllocateResponse (checkpoint only).
    """

    pod_uid: str | None
    namespace: str | None
    pod: str | None
    container: str
    resource: str
    device_ids: tuple[str, ...]
    source: Source
    response: AllocateResponse | None = None

    def visible_devices(self) -> tuple[str, ...] | None:
        """The devices the plugin made visible to the container, when recorded."""
        return None if self.response is None else self.response.visible_devices()


@dataclasses.dataclass(frozen=True)
class ResourceDevices:
    """The device IDs one resource advertises."""

    resource: str
    device_ids: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class RegisteredDevices:
    """Healthy devices per resource: the checkpoint's `RegisteredDevices` (healthy when kubelet
    wrote it) or PodResources `GetAllocatableResources` (healthy now)."""

    resources: tuple[ResourceDevices, ...]
    source: Source

    def device_ids(self, resource: str) -> tuple[str, ...]:
        """The IDs registered for one resource (empty when the resource is not registered)."""
        return tuple(i for r in self.resources if r.resource == resource for i in r.device_ids)

    def all_ids(self) -> frozenset[tuple[str, str]]:
        """Every (resource, device ID) pair."""
        return frozenset((r.resource, i) for r in self.resources for i in r.device_ids)


def group_devices(devices: Iterable[tuple[str, str]], source: Source) -> RegisteredDevices:
    """Collect (resource, device ID) pairs by resource, in first-seen order, without repeats."""
    by_resource: dict[str, dict[str, None]] = {}
    for resource, device_id in devices:
        by_resource.setdefault(resource, {})[device_id] = None
    resources = tuple(ResourceDevices(r, tuple(ids)) for r, ids in by_resource.items())
    return RegisteredDevices(resources, source)


# --- physical inventory (what NVML reports on the node) ------------------------------------------


@dataclasses.dataclass(frozen=True)
class MigDevice:
    """A MIG device on a GPU: its UUID, profile (`1g.10gb`) and GPU/compute instance IDs."""

    uuid: str
    profile: str | None
    gi: int | None
    ci: int | None


@dataclasses.dataclass(frozen=True)
class Gpu:
    """A physical GPU: NVML index, UUID, model name, `/dev/nvidia<minor>` and MIG devices."""

    index: int | None
    uuid: str
    model: str | None = None
    minor: int | None = None
    mig_devices: tuple[MigDevice, ...] = ()


# --- pods (from the API server, or a `kubectl get pods -o json` file) ---------------------------


@dataclasses.dataclass(frozen=True)
class PodRef:
    """What joins the two kubelet sources: a pod's UID, namespace, name and node."""

    uid: str
    namespace: str
    name: str
    node: str | None = None


def pods_from_document(document: Any, name: str) -> tuple[PodRef, ...]:
    """Pods from `kubectl get pods -A -o json` (a List or PodList) or one Pod object.

    Raises `InputError` naming `name` when the document is neither.
    """
    if not isinstance(document, dict):
        raise _not_pods(name, f"the document is a {type(document).__name__}, not an object")
    if document.get("kind") == "Pod":
        items: Any = [document]
    else:
        items = document.get("items")
        if not isinstance(items, list):
            raise _not_pods(name, "it has neither `kind: Pod` nor an `items` list")
    return tuple(pod for pod in map(_pod_ref, items) if pod is not None)


def _pod_ref(item: Any) -> PodRef | None:
    if not isinstance(item, dict) or item.get("kind", "Pod") != "Pod":
        return None
    meta, spec = item.get("metadata"), item.get("spec")
    if not isinstance(meta, dict) or not isinstance(meta.get("uid"), str):
        return None
    node = spec.get("nodeName") if isinstance(spec, dict) else None
    return PodRef(
        uid=meta["uid"],
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        node=node if isinstance(node, str) else None,
    )


def _not_pods(name: str, problem: str) -> InputError:
    return InputError(
        f"{name} is not a pod list: {problem}",
        hint="produce it with `kubectl get pods -A -o json`",
    )
