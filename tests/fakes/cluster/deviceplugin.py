"""The simulated NVIDIA device plugin: node capacity and allocatable from GPUs and config.

Owns `DevicePluginRuntime`: for each running plugin pod, the config it loaded (pluginconfig.py,
through the config-manager flow in programs.py) and what it advertises (devices.py), the device
IDs per node the kubelet allocates from, and the node's `status.capacity/allocatable` for
`nvidia.com/*`: a crashed, blocked or deleted plugin leaves capacity as it was and allocatable 0,
as kubelet does when a plugin unregisters (docs/upstream-facts.md P3.3). Must not render pod status
or touch node labels (gfd.py).
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict
from typing import Any

from tests.controlplane.store import ApiStore
from tests.fakes.cluster.allocation import Allocation, AllocationTable
from tests.fakes.cluster.devices import PluginStartError, Resource, advertise
from tests.fakes.cluster.loop import ControlLoop
from tests.fakes.cluster.nodes import SimNode
from tests.fakes.cluster.pluginconfig import ConfigError, PluginConfig, load
from tests.fakes.cluster.programs import ConfigView, ProgramPod, ProgramRuntime
from tests.kube import ApiError

PLUGIN_CONTAINERS = ("nvidia-device-plugin-ctr", "nvidia-device-plugin")


class DevicePluginRuntime(ProgramRuntime):
    """Every node's device plugin process(es), and what kubelet learned from them."""

    name = "device-plugin"
    container_names = PLUGIN_CONTAINERS
    program = "nvidia-device-plugin"

    def __init__(self, store: ApiStore, loop: ControlLoop, nodes: dict[str, SimNode]) -> None:
        super().__init__(store, loop, nodes)
        self._lock = threading.Lock()
        self._registered: dict[str, dict[str, Resource]] = {}
        self._ever: dict[str, dict[str, int]] = {}  # resource -> last device count, per node

    # ---- what the kubelet reads -------------------------------------------------------------

    def devices(self, node: str) -> dict[str, Resource]:
        """Healthy registered resources on `node` (empty while no plugin runs there)."""
        with self._lock:
            return dict(self._registered.get(node, {}))

    def known(self, node: str) -> set[str]:
        """Resources a plugin ever registered on `node` (the device manager remembers them)."""
        with self._lock:
            return set(self._ever.get(node, {}))

    def allocate(
        self, node: str, allocations: list[Allocation], table: AllocationTable
    ) -> list[Allocation]:
        """The plugin's part of admission (GetPreferredAllocation, Allocate; `table`: what the
        node's other pods hold): the stand-in keeps the kubelet's choice; NVIDIA's plugin
        (tests/fakes/node/nvidiaplugin.py) is asked over gRPC. Raises Rejected if it refuses."""
        return allocations

    def state(self, node: str) -> ProgramPod | None:
        """The plugin pod's processes on `node` (its log holds `Running with config:`)."""
        pods = self.on_node(node)
        return pods[-1] if pods else None

    # ---- the program ------------------------------------------------------------------------

    def _load(self, state: ProgramPod, view: ConfigView) -> None:
        text, error = self.config_text(state, view)
        if error is not None:
            self._fail(state, f"error starting plugins: {error}")
            return
        try:
            config = load(text, state.setup.env)
        except ConfigError as exc:
            self._fail(state, f"error starting plugins: {exc}")
            return
        node = self.nodes.get(state.node)
        try:
            resources = advertise(node.gpu_views() if node else (), config)
        except PluginStartError as exc:
            if config.fail_on_init_error:
                self._fail(state, str(exc))
                return
            state.log.append(f"{exc}; failOnInitError=false, waiting indefinitely")
            resources = {}
        state.main_error, state.config, state.result = None, config, resources
        state.log.append("Running with config:\n" + json.dumps(_effective(config), indent=2))

    @staticmethod
    def _fail(state: ProgramPod, message: str) -> None:
        state.main_error = message
        state.result = {}
        state.log.append(message)

    def changed(self, node: str) -> None:
        active: dict[str, Resource] = {}
        for state in self.on_node(node):
            if state.running:
                active.update(state.result or {})
        with self._lock:
            self._registered[node] = active
            ever = self._ever.setdefault(node, {})
            ever.update({name: len(r.devices) for name, r in active.items()})
            capacity = {name: str(count) for name, count in ever.items()}
        allocatable = {
            name: str(len(active[name].devices)) if name in active else "0" for name in capacity
        }
        self._publish(node, capacity, allocatable)
        super().changed(node)

    def _publish(self, node: str, capacity: dict[str, str], allocatable: dict[str, str]) -> None:
        try:
            current = self.store.get("nodes", node).get("status") or {}
        except ApiError:
            return  # the node is gone
        have_capacity = current.get("capacity") or {}
        have_allocatable = current.get("allocatable") or {}
        if all(have_capacity.get(k) == v for k, v in capacity.items()) and all(
            have_allocatable.get(k) == v for k, v in allocatable.items()
        ):
            return
        body = {"status": {"capacity": capacity, "allocatable": allocatable}}
        self.store.patch("nodes", node, body, status=True)

    def forget(self, node: str) -> None:
        with self._lock:
            self._registered.pop(node, None)
            self._ever.pop(node, None)


def _effective(config: PluginConfig) -> dict[str, Any]:
    sharing = config.sharing
    block = {
        "renameByDefault": any(r.rename for r in sharing.resources),
        "failRequestsGreaterThanOne": sharing.fail_requests_greater_than_one,
        "resources": [asdict(r) for r in sharing.resources],
    }
    key = {"mps": "mps", "time-slicing": "timeSlicing"}.get(sharing.strategy)
    return {
        "version": "v1",
        "flags": dict(config.flags),
        "resources": {"gpus": [{"pattern": "*", "name": "nvidia.com/gpu"}]},
        "sharing": {key: block} if key else {"timeSlicing": {}},
    }
