"""The kubelet's DRA manager for one simulated node, over the kubelet's real gRPC.

A DRA driver's kubelet plugin (NVIDIA's `gpu-kubelet-plugin`, unmodified) announces itself with a
socket in the kubelet's plugin registry directory (`--kubelet-registrar-directory-path`,
`<driver>-reg.sock`). The kubelet's plugin watcher finds the socket, dials it, asks the
`pluginregistration.Registration` service `GetInfo` (type `DRAPlugin`, the driver's name, its
DRA endpoint and the gRPC services it serves there, e.g. `v1.DRAPlugin`) and answers with
`NotifyRegistrationStatus`: registered, or not with the reason (an unknown type, no DRA API
version the kubelet speaks). From then on, for each pod bound to the node the kubelet asks the
driver to `NodePrepareResources` the pod's allocated ResourceClaims before its containers start,
and `NodeUnprepareResources` once the pod is gone; the devices a claim was prepared with are
what PodResources reports as the container's dynamic resources.

Owns `DraManager` (the watcher, one `Plugin` per registered driver, prepare and unprepare) and
`PreparedDevice`. Must not: decide what a driver publishes or allocates (the driver writes its
ResourceSlices itself, Kubernetes' scheduler allocates), or talk to the API server.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from tests.kit.node._proto.dra.v1 import dra_pb2 as dra
from tests.kit.node._proto.dra.v1 import dra_pb2_grpc as dra_grpc
from tests.kit.node._proto.pluginregistration.v1 import registration_pb2 as reg
from tests.kit.node._proto.pluginregistration.v1 import registration_pb2_grpc as reg_grpc

PLUGIN_TYPE = "DRAPlugin"
# The DRA gRPC services this kubelet speaks, preferred first (a 1.37 kubelet: v1, then v1beta1).
SERVICES = ("v1.DRAPlugin",)
_POLL = 0.2
_CALL_TIMEOUT = 30.0


class PrepareError(Exception):
    """The driver could not prepare (or unprepare) a claim: the driver's words, in the
    kubelet's (k8s.io/kubernetes pkg/kubelet/cm/dra: `NodePrepareResources failed for
    ResourceClaim <name>: <the driver's error>`, `DRA driver <name> is not registered`)."""


@dataclass(frozen=True)
class ClaimRef:
    """A ResourceClaim as the kubelet names it to the driver."""

    namespace: str
    uid: str
    name: str


@dataclass(frozen=True)
class PreparedDevice:
    """One device of a prepared claim, as the driver answered NodePrepareResources."""

    driver: str
    pool: str
    device: str
    requests: tuple[str, ...]
    cdi_devices: tuple[str, ...]


@dataclass
class Plugin:
    """One registered DRA driver."""

    driver: str
    registration: Path  # its socket in the registry directory
    endpoint: str  # its DRA socket
    services: tuple[str, ...]
    channel: grpc.Channel | None = None


@dataclass
class _Seen:
    sockets: dict[Path, float] = field(default_factory=dict)  # socket -> its mtime when dialled


class DraManager:
    """One node's plugin watcher (DRA plugins only) and DRA manager."""

    def __init__(self, node: str, registry: Path) -> None:
        self.node = node
        self.registry = registry
        self._lock = threading.Condition()
        self._plugins: dict[str, Plugin] = {}
        self._seen = _Seen()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # every (driver, registered, error) the kubelet answered, in order
        self.registrations: list[tuple[str, bool, str]] = []

    # ---- lifetime -----------------------------------------------------------------------------

    def start(self) -> DraManager:
        self.registry.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._watch, name=f"dra-{self.node}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            plugins = list(self._plugins.values())
            self._plugins.clear()
        for plugin in plugins:
            if plugin.channel is not None:
                plugin.channel.close()

    # ---- the plugin watcher -------------------------------------------------------------------

    def _watch(self) -> None:
        """The kubelet watches the registry with inotify; a poll finds the same sockets."""
        while not self._stop.is_set():
            for socket in sorted(self.registry.glob("*.sock")):
                try:
                    stamp = socket.stat().st_mtime
                except FileNotFoundError:
                    continue
                if self._seen.sockets.get(socket) != stamp:
                    self._seen.sockets[socket] = stamp
                    if not self._register(socket):
                        # not listening yet (bound, not serving): the kubelet's reconciler
                        # tries a registration that failed again on its next pass
                        del self._seen.sockets[socket]
            for gone in [s for s in self._seen.sockets if not s.exists()]:
                del self._seen.sockets[gone]
                self._unregister(gone)
            self._stop.wait(_POLL)

    def _register(self, socket: Path) -> bool:
        """Dial a socket found in the registry; False where nothing answered there yet."""
        channel = grpc.insecure_channel(f"unix://{socket}")
        try:
            stub = reg_grpc.RegistrationStub(channel)
            try:
                info = stub.GetInfo(reg.InfoRequest(), timeout=_CALL_TIMEOUT)
            except grpc.RpcError:
                return False  # bound but not serving yet (or not any more): dial it again
            error = _refusal(info)
            stub.NotifyRegistrationStatus(
                reg.RegistrationStatus(plugin_registered=not error, error=error),
                timeout=_CALL_TIMEOUT,
            )
        except grpc.RpcError as exc:
            # a refusal the plugin acknowledges with an error is still a refusal
            self.registrations.append((socket.name, False, str(exc.details())))
            return True
        finally:
            channel.close()
        with self._lock:
            self.registrations.append((info.name, not error, error))
            if not error:
                old = self._plugins.get(info.name)
                if old is not None and old.channel is not None:
                    old.channel.close()
                self._plugins[info.name] = Plugin(
                    info.name, socket, info.endpoint, tuple(info.supported_versions)
                )
            self._lock.notify_all()
        return True

    def _unregister(self, socket: Path) -> None:
        with self._lock:
            for name, plugin in list(self._plugins.items()):
                if plugin.registration == socket:
                    del self._plugins[name]
                    if plugin.channel is not None:
                        plugin.channel.close()
            self._lock.notify_all()

    # ---- what the kubelet asks -----------------------------------------------------------------

    def registered(self) -> dict[str, tuple[str, ...]]:
        """Driver -> the DRA services it serves, for the drivers registered now."""
        with self._lock:
            return {name: p.services for name, p in self._plugins.items()}

    def wait_registered(
        self, driver: str, timeout: float, alive: Callable[[], bool] = lambda: True
    ) -> bool:
        """Until `driver` registered (True), `alive()` turned false or `timeout` passed."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while driver not in self._plugins:
                left = deadline - time.monotonic()
                if left <= 0 or not alive():
                    return False
                self._lock.wait(min(left, _POLL))
            return True

    def prepare(self, driver: str, claims: list[ClaimRef]) -> dict[str, list[PreparedDevice]]:
        """NodePrepareResources: claim UID -> its prepared devices; a claim the driver could not
        prepare raises PrepareError with the driver's words."""
        stub = dra_grpc.DRAPluginStub(self._channel(driver))
        request = dra.NodePrepareResourcesRequest(
            claims=[dra.Claim(namespace=c.namespace, uid=c.uid, name=c.name) for c in claims]
        )
        try:
            answer = stub.NodePrepareResources(request, timeout=_CALL_TIMEOUT)
        except grpc.RpcError as exc:
            raise PrepareError(f"NodePrepareResources: {exc.details()}") from exc
        prepared: dict[str, list[PreparedDevice]] = {}
        for claim in claims:
            result = answer.claims.get(claim.uid)
            if result is None:
                raise PrepareError(f"{driver} returned no result for claim {claim.name}")
            if result.error:
                raise PrepareError(
                    f"NodePrepareResources failed for ResourceClaim {claim.name}: {result.error}"
                )
            prepared[claim.uid] = [
                PreparedDevice(
                    driver,
                    d.pool_name,
                    d.device_name,
                    tuple(d.request_names),
                    tuple(d.cdi_device_ids),
                )  # fmt: skip
                for d in result.devices
            ]
        return prepared

    def unprepare(self, driver: str, claims: list[ClaimRef]) -> None:
        stub = dra_grpc.DRAPluginStub(self._channel(driver))
        request = dra.NodeUnprepareResourcesRequest(
            claims=[dra.Claim(namespace=c.namespace, uid=c.uid, name=c.name) for c in claims]
        )
        try:
            answer = stub.NodeUnprepareResources(request, timeout=_CALL_TIMEOUT)
        except grpc.RpcError as exc:
            raise PrepareError(f"NodeUnprepareResources: {exc.details()}") from exc
        errors = [r.error for r in answer.claims.values() if r.error]
        if errors:
            raise PrepareError("; ".join(errors))

    def _channel(self, driver: str) -> grpc.Channel:
        with self._lock:
            plugin = self._plugins.get(driver)
            if plugin is None:
                raise PrepareError(f"DRA driver {driver} is not registered")
            if plugin.channel is None:
                plugin.channel = grpc.insecure_channel(f"unix://{plugin.endpoint}")
            return plugin.channel


def _refusal(info: reg.PluginInfo) -> str:
    """Why the kubelet refuses a plugin ("" when it accepts it)."""
    if info.type != PLUGIN_TYPE:
        return f"plugin type {info.type!r} is not handled here (only {PLUGIN_TYPE})"
    if not info.name:
        return "the plugin gave no driver name"
    if not any(service in SERVICES for service in info.supported_versions):
        offered = ", ".join(info.supported_versions) or "none"
        return f"none of the DRA gRPC services {offered} is supported (supported: {SERVICES})"
    return ""
