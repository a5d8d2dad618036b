"""Kubelet stand-in: a temporary kubelet root holding the device-manager checkpoint and a live
PodResources v1 gRPC server on ``<root>/pod-resources/kubelet.sock``.

Owns `FakeKubelet`, the root and its server; its parts, one noun each: ``pods`` (the plain-data
description of a node's pods, devices and allocatable resources), ``checkpoint`` (writing
``device-plugins/kubelet_internal_checkpoint`` in kubelet's JSON, current and pre-1.20
formats), ``allocresp`` (encoding ``AllocResp`` with a hand-written protobuf encoder,
independent of the generated stubs the product decodes with), ``podresources`` (List,
GetAllocatableResources and Get as a real ``grpc.server`` serves them), ``samples`` (the nodes
tests/data/checkpoints/ is generated from). Everything is importable from here.

Must not: be imported by product code, or patch ``grpc``: the product's real client talks to a real
server over a real unix socket (docs/architecture.md, "Stand-ins"). Facts follow
docs/upstream-facts.md N1–N3.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent import futures
from pathlib import Path

import grpc

from kubectl_gpu._proto.podresources.v1 import api_pb2_grpc
from tests.kit.node.kubelet.allocresp import encode_alloc_resp, nvidia_envvar_response
from tests.kit.node.kubelet.checkpoint import (
    CheckpointEntry,
    CheckpointFormat,
    CorruptKind,
    checkpoint_document,
    checkpoint_entries,
    checkpoint_text,
    corrupt_checkpoint_bytes,
    registered_devices,
    stand_in_checksum,
    write_atomically,
)
from tests.kit.node.kubelet.podresources import (
    NodeState,
    PodResourcesServicer,
    container_devices,
    pod_message,
)
from tests.kit.node.kubelet.pods import (
    NO_TOPOLOGY,
    Allocatable,
    AllocateResponse,
    Claim,
    Container,
    Devices,
    DeviceSpec,
    Memory,
    Mount,
    Pod,
)
from tests.kit.node.kubelet.samples import (
    SAMPLES,
    NodeScenario,
    pre_1_20_node,
    sample_text,
    time_sliced_node,
    write_samples,
)

__all__ = [
    "NO_TOPOLOGY", "SAMPLES", "SOCKET_PATH_MAX", "AllocateResponse", "Allocatable",
    "CheckpointEntry", "CheckpointFormat", "Claim", "Container", "CorruptKind", "DeviceSpec",
    "Devices", "FakeKubelet", "Memory", "Mount", "NodeScenario", "Pod", "checkpoint_document",
    "checkpoint_entries", "checkpoint_text", "container_devices", "corrupt_checkpoint_bytes",
    "encode_alloc_resp", "nvidia_envvar_response", "pod_message", "pre_1_20_node",
    "registered_devices", "sample_text", "stand_in_checksum", "time_sliced_node",
    "write_atomically", "write_samples",
]  # fmt: skip

SOCKET_PATH_MAX = 107  # AF_UNIX sun_path is 108 bytes including the terminating NUL


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
        self._state = NodeState()
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
            PodResourcesServicer(self._state), server
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

    def set_active(self, active: Callable[[], set[tuple[str, str]]] | None) -> None:
        """Ask `active()` at each List and Get for the (namespace, name) of the node's pods the
        API server still has, and leave out the others: a kubelet deletes a pod's API object
        only after the pod stopped being active, so a pod gone from the API is never in List,
        however late `set_pods` learns of it."""
        with self._state.lock:
            self._state.active = active

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
