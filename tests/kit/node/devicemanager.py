"""The kubelet's device manager for one simulated node, over the kubelet's real gRPC.

A device plugin (NVIDIA's own binary, unmodified) registers with the kubelet on
`<device-plugins>/kubelet.sock` (the `Registration` service, API version v1beta1); the kubelet
then dials the plugin's endpoint in the same directory, asks `GetDevicePluginOptions`, and
follows `ListAndWatch`, whose every answer is the plugin's whole device list. From those lists
the kubelet reports the Node's `status.capacity` (every device) and `status.allocatable` (the
healthy ones) for the resource; when the plugin's stream ends (it exited, or its pod was
deleted) the resource keeps its capacity and its allocatable drops to 0, as the kubelet does
while it waits out a plugin's grace period. A second registration for the same resource replaces
the first. `allocate` asks the plugin for a container's devices as the kubelet does at admission
(GetPreferredAllocation when the plugin offers it, then Allocate).

Owns `DeviceManager` (the Registration server, one watcher per registered endpoint, the
node-status patch through the API server) and `Endpoint` (what one registration advertised).
Must not: decide what a plugin advertises, or write anything to the Node but capacity and
allocatable of the resources plugins registered.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from tests.kit.node._proto.deviceplugin.v1beta1 import service_pb2 as api
from tests.kit.node._proto.deviceplugin.v1beta1 import service_pb2_grpc as api_grpc

API_VERSION = "v1beta1"
KUBELET_SOCKET = "kubelet.sock"
HEALTHY = "Healthy"
_DIAL_TIMEOUT = 10.0

# (node, {resource: capacity}, {resource: allocatable}): writes the Node's status
Publish = Callable[[str, dict[str, str], dict[str, str]], None]


@dataclass
class Endpoint:
    """One registered plugin endpoint and what it last advertised."""

    resource: str
    socket: Path
    options: Any = None  # the plugin's DevicePluginOptions
    devices: dict[str, str] = field(default_factory=dict)  # device ID -> health
    channel: grpc.Channel | None = None
    stopped: bool = False
    updates: int = 0

    @property
    def healthy(self) -> list[str]:
        return [d for d, health in self.devices.items() if health == HEALTHY]


class DeviceManager(api_grpc.RegistrationServicer):
    """One node's device manager: Registration on `directory/kubelet.sock`."""

    def __init__(
        self, node: str, directory: Path, publish: Publish, changed: Callable[[], None]
    ) -> None:
        self.node = node
        self.directory = directory
        self._publish = publish
        self._changed = changed  # the kubelet's admission must look again
        self._lock = threading.Condition()
        self._endpoints: dict[str, Endpoint] = {}
        self._capacity: dict[str, int] = {}  # resource -> devices last advertised, ever
        self._server: grpc.Server | None = None
        self._unreported = 0  # device lists received but not yet written to the Node
        self._closed = False  # stopped: nothing more is written (the Node may be another's)
        self.registrations: list[tuple[str, str, str]] = []  # (version, endpoint, resource)
        # every (capacity, allocatable) written to the Node, in order (a test's record of moments
        # a later write may have replaced already)
        self.published: list[tuple[dict[str, str], dict[str, str]]] = []

    # ---- lifetime ---------------------------------------------------------------------------

    def start(self) -> DeviceManager:
        self.directory.mkdir(parents=True, exist_ok=True)
        socket = self.directory / KUBELET_SOCKET
        socket.unlink(missing_ok=True)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        api_grpc.add_RegistrationServicer_to_server(self, server)
        server.add_insecure_port(f"unix://{socket}")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        with self._lock:
            self._closed = True
        if self._server is not None:
            self._server.stop(grace=None).wait(5)
            self._server = None
        with self._lock:
            endpoints = list(self._endpoints.values())
        for endpoint in endpoints:
            self._close(endpoint)

    # ---- the Registration service ---------------------------------------------------------

    def Register(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802 (gRPC)
        """A plugin registers: answer at once, then dial it (the kubelet does it apart)."""
        self.registrations.append((request.version, request.endpoint, request.resource_name))
        if request.version != API_VERSION:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Unsupported version {request.version!r}: supported is {API_VERSION}",
            )
        endpoint = Endpoint(request.resource_name, self.directory / request.endpoint)
        with self._lock:
            old = self._endpoints.get(endpoint.resource)
            self._endpoints[endpoint.resource] = endpoint
        if old is not None:
            self._close(old)
        threading.Thread(
            target=self._watch, args=(endpoint,), name=f"dm-{self.node}", daemon=True
        ).start()
        return api.Empty()

    # ---- one endpoint ---------------------------------------------------------------------

    def _watch(self, endpoint: Endpoint) -> None:
        channel = grpc.insecure_channel(f"unix://{endpoint.socket}")
        endpoint.channel = channel
        stub = api_grpc.DevicePluginStub(channel)
        try:
            endpoint.options = stub.GetDevicePluginOptions(api.Empty(), timeout=_DIAL_TIMEOUT)
            for response in stub.ListAndWatch(api.Empty()):
                with self._lock:
                    if endpoint.stopped:
                        return
                    endpoint.devices = {d.ID: d.health for d in response.devices}
                    endpoint.updates += 1
                    self._unreported += 1
                    self._lock.notify_all()
                try:
                    self._report()
                finally:
                    with self._lock:
                        self._unreported -= 1
        except grpc.RpcError:
            pass  # the plugin went away: below
        finally:
            with self._lock:
                current = self._endpoints.get(endpoint.resource) is endpoint
                endpoint.stopped = True
                if current:
                    endpoint.devices = {}
                self._lock.notify_all()
            channel.close()
            if current:
                self._report()

    def _close(self, endpoint: Endpoint) -> None:
        with self._lock:
            endpoint.stopped = True
        if endpoint.channel is not None:
            endpoint.channel.close()

    def _report(self) -> None:
        """The Node's capacity and allocatable for every resource a plugin ever registered."""
        with self._lock:
            if self._closed:
                return
            for name, endpoint in self._endpoints.items():
                if not endpoint.stopped:
                    self._capacity[name] = len(endpoint.devices)
            capacity = {name: str(count) for name, count in self._capacity.items()}
            allocatable = {
                name: str(len(self._endpoints[name].healthy))
                if name in self._endpoints and not self._endpoints[name].stopped
                else "0"
                for name in capacity
            }
            self._publish(self.node, capacity, allocatable)
            self.published.append((capacity, allocatable))
        self._changed()

    # ---- what the kubelet's admission reads -------------------------------------------------

    def healthy(self) -> dict[str, list[str]]:
        """Resource -> healthy device IDs of the plugins registered now."""
        with self._lock:
            return {
                name: e.healthy
                for name, e in self._endpoints.items()
                if not e.stopped and e.updates
            }

    def pending(self) -> bool:
        """Whether a registered plugin's first device list, or a list received since, has not
        reached the Node yet."""
        with self._lock:
            waiting = any(not e.stopped and not e.updates for e in self._endpoints.values())
            return waiting or self._unreported > 0

    def known(self) -> set[str]:
        """Resources a plugin ever advertised on this node."""
        with self._lock:
            return set(self._capacity)

    def wait_unregistered(self, timeout: float) -> bool:
        """Block until every endpoint's stream has ended (its plugin is gone), so that what the
        kubelet does on unregistration is done before anything registers again."""
        with self._lock:
            return self._lock.wait_for(
                lambda: all(e.stopped for e in self._endpoints.values()), timeout
            )

    def wait_for(self, resource: str, timeout: float) -> list[str]:
        """Block until `resource` is registered with a device list; its device IDs."""
        with self._lock:
            self._lock.wait_for(
                lambda: (
                    resource in self._endpoints
                    and not self._endpoints[resource].stopped
                    and self._endpoints[resource].updates > 0
                ),
                timeout,
            )
            endpoint = self._endpoints.get(resource)
            return list(endpoint.devices) if endpoint and not endpoint.stopped else []

    def allocate(
        self, resource: str, available: Sequence[str], count: int
    ) -> tuple[list[str], Any]:
        """The kubelet's allocation of `count` devices of `resource` for one container: the
        plugin's preferred IDs where it offers a preference (else the first available), then
        its Allocate answer (a ContainerAllocateResponse)."""
        with self._lock:
            endpoint = self._endpoints.get(resource)
        if endpoint is None or endpoint.stopped or endpoint.channel is None:
            raise LookupError(f"no device plugin registered for {resource} on {self.node}")
        stub = api_grpc.DevicePluginStub(endpoint.channel)
        chosen = list(available[:count])
        if endpoint.options is not None and endpoint.options.get_preferred_allocation_available:
            request = api.PreferredAllocationRequest(
                container_requests=[
                    api.ContainerPreferredAllocationRequest(
                        available_deviceIDs=list(available), allocation_size=count
                    )
                ]
            )
            preferred = stub.GetPreferredAllocation(request, timeout=_DIAL_TIMEOUT)
            chosen = list(preferred.container_responses[0].deviceIDs)
        answer = stub.Allocate(
            api.AllocateRequest(
                container_requests=[api.ContainerAllocateRequest(devices_ids=chosen)]
            ),
            timeout=_DIAL_TIMEOUT,
        )
        return chosen, answer.container_responses[0]
