"""The kubelet stand-in's plain data: a node's pods and containers as PodResources and the
checkpoint see them, the devices, memory blocks and DRA claims kubelet allocated to them, what
a device plugin's Allocate answered, and what the node reports allocatable. Must not encode
or serve anything (`checkpoint`, `allocresp` and `podresources` do)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

NO_TOPOLOGY = -1  # kubelet's nodeWithoutTopology: the plugin reported no NUMA node


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
