"""NVIDIA's own device plugin (v0.19.3, unmodified) as the process of each plugin pod.

In every simulated cluster (`SimCluster`), the pod of the layout's device plugin DaemonSet on a
GPU node runs NVIDIA's `nvidia-device-plugin` binary (built by `scripts/gobins.py
nvidia-device-plugin`) inside the node's sandbox (sandbox.py: the node's
device-plugin directory at the hard-coded /var/lib/kubelet/device-plugins, the driver's MIG
minors, the node's network namespace), with `--driver-root`/`--driver-root-ctr-path` at the
node's driver root (the project's libnvidia-ml.so.1 over the node's GPUs), `NODE_NAME`, the
container's literal env, and `--config-file` holding the config the layout gives the pod (the
key the config-manager linked, or the ConfigMap key the container names). It registers with the
node's kubelet stand-in (devicemanager.py), which turns its device lists into the Node's
capacity and allocatable through the API server. Its output is the container's log; a
config-manager switch sends it SIGHUP after rewriting its config file (it restarts its plugins
and re-reads the file); deleting the pod kills it (allocatable drops to 0, capacity stays); an
exit is a crash the kubelet's back-off restarts.

Owns `NvidiaPluginRuntime`, the device-plugin program of every simulated cluster: a `ProgramRuntime`
whose program is NVIDIA's process (the config-manager flow of programs.py is kept: which key the
init container and sidecar link is the layout's); `busy`, what a settling cluster still waits for (a
process that has not finished starting its plugins); the binary is tests/kit/kube/builds.py's to
find. Must not: interpret the plugin's config (NVIDIA's binary does), or write Node status itself
(the kubelet stand-in does).
"""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.kit.kube import ApiError, builds
from tests.kit.node import deviceallocation, mps, stopping
from tests.kit.node.agents import NodeSide
from tests.kit.node.allocation import Allocation, AllocationTable
from tests.kit.node.devicemanager import DeviceManager
from tests.kit.node.nodes import SimNode
from tests.kit.node.programs import ConfigView, ProgramPod, ProgramRuntime
from tests.kit.node.sandbox import SYSTEM_PATH, NodeProgram, Sandbox
from tests.kit.plane.containerlogs import LogStore
from tests.kit.plane.loop import ControlLoop
from tests.kit.plane.store import ApiStore

PROGRAM = "nvidia-device-plugin"
PLUGIN_CONTAINERS = ("nvidia-device-plugin-ctr", "nvidia-device-plugin")
# Env the runtime sets itself (flags win over them in NVIDIA's CLI, but a stale one would
# confuse a reader of the process's environment).
_OWN_ENV = ("CONFIG_FILE", "NVIDIA_DRIVER_ROOT", "CONTAINER_DRIVER_ROOT", "NODE_NAME")
_STOP_GRACE = 5.0
# Lines after which a start-up has nothing more to do: the last plugin registered, none had
# devices, or one failed and it waits 30 s to retry (cmd/nvidia-device-plugin/main.go).
_START_UP_ENDS = (
    "Registered device plugin for",
    "No devices found. Waiting indefinitely.",
    "Retrying in 30s",
)
# A registration is followed at once by the next plugin's start: this long without a line, the
# last one has registered.
_QUIET = 0.3


class _StartUp:
    """Where one run of NVIDIA's binary is in its start-up, in its own words."""

    def __init__(self) -> None:
        self.starting = True  # from spawn or SIGHUP until a line that ends a start-up
        self.last_output = time.monotonic()

    def saw(self, line: str) -> None:
        """Follow the start-up in the process's own words (cmd/nvidia-device-plugin/main.go
        `startPlugins`, internal/plugin/server.go `Start`): it starts its plugins one by one
        and then logs nothing more until a signal, a kubelet restart or its 30 s retry."""
        if "Starting Plugins." in line or "Starting GRPC server for" in line:
            self.starting = True  # the start-up, or the next plugin's
        elif any(end in line for end in _START_UP_ENDS):
            self.starting = False
            self.last_output = time.monotonic()

    def busy(self) -> bool:
        """Starting, or a moment after a plugin registered (the next may start then); what it
        logs afterwards (health checks) does not count."""
        return self.starting or time.monotonic() - self.last_output < _QUIET


@dataclass(frozen=True)
class _Run:
    """One run of NVIDIA's binary for one pod, and where its start-up is."""

    program: NodeProgram
    startup: _StartUp

    def busy(self) -> bool:
        return self.program.exited() is None and self.startup.busy()


class NvidiaPluginRuntime(ProgramRuntime):
    """Every GPU node's plugin pod running NVIDIA's binary, and each node's device manager."""

    name = "device-plugin"
    container_names = PLUGIN_CONTAINERS
    program = PROGRAM
    writes_own_log = True  # the kubelet adds nothing to a real program's log

    def __init__(
        self,
        store: ApiStore,
        loop: ControlLoop,
        nodes: dict[str, SimNode],
        sides: dict[str, NodeSide],
        logs: LogStore | None,
    ) -> None:
        super().__init__(store, loop, nodes)
        self.sides = sides
        self.logs = logs
        self.binary = builds.program(PROGRAM)
        self._procs: dict[str, _Run] = {}  # pod UID -> its running program
        # (pod UID, container, resource) -> NVIDIA's ContainerAllocateResponse
        self.responses: dict[tuple[str, str, str], Any] = {}
        self._plock = threading.Lock()
        self.managers = {
            name: DeviceManager(
                name, Sandbox(side.dir).device_plugins, self._publish, self._relook(name)
            )
            for name, side in sides.items()
        }

    def _relook(self, node: str) -> Callable[[], None]:
        """What a device list's arrival does: the kubelet's admission looks at `node` again."""
        return lambda: self.loop.enqueue("kubelet", ("node", node))

    def start_managers(self) -> None:
        for manager in self.managers.values():
            manager.start()

    def stop_all(self) -> None:
        with self._plock:
            procs = list(self._procs.values())
            self._procs.clear()
        stopping.stop_programs((p.program.process, p.program.reader) for p in procs)
        for manager in self.managers.values():
            manager.stop()

    # ---- what the kubelet's admission reads ---------------------------------------------------

    def devices(self, node: str) -> dict[str, tuple[str, ...]]:
        """The healthy device IDs the plugin advertised on `node`, per resource."""
        manager = self.managers.get(node)
        if manager is None:
            return {}
        return {name: tuple(ids) for name, ids in manager.healthy().items()}

    def known(self, node: str) -> set[str]:
        manager = self.managers.get(node)
        return manager.known() if manager is not None else set()

    def allocate(
        self, node: str, allocations: list[Allocation], table: AllocationTable
    ) -> list[Allocation]:
        """As the kubelet's device manager admits a container (deviceallocation.py); the
        plugin's answers are kept for the checkpoint's AllocResp (`responses`)."""
        manager = self.managers.get(node)
        if manager is None:
            return allocations
        return deviceallocation.allocate(manager, allocations, table, self.responses)

    def forget(self, node: str) -> None:
        pass  # the device manager's state goes with the node's directory

    # ---- the program ------------------------------------------------------------------------

    def _load(self, state: ProgramPod, view: ConfigView) -> None:
        """Start NVIDIA's binary, or SIGHUP the running one after rewriting its config file."""
        state.main_error = None
        side = self.sides.get(state.node)
        if side is None:  # not a GPU node: NVIDIA's plugin finds no NVML and says so
            state.main_error = "no GPU on this node: libnvidia-ml.so.1 not found"
            return
        config = self._write_config(state, view, side)
        with self._plock:
            running = self._procs.get(state.uid)
        if running is not None:
            pid = running.program.pid()
            if pid is not None:
                running.startup.starting = True  # until its restart has registered again
                os.kill(pid, signal.SIGHUP)
                return
        self._spawn(state, side, config)

    def _write_config(self, state: ProgramPod, view: ConfigView, side: NodeSide) -> Path | None:
        """The file `--config-file` names: the config the pod would see mounted; a link to
        /dev/null where config-manager linked no key (`ln -sf /dev/null`: NVIDIA's defaults,
        and a later SIGHUP re-reads the same path); a path that does not exist where the pod's
        config file is missing (NVIDIA's binary then fails to read it, in its own words); None
        for no config file at all (a static manifest)."""
        text, error = self.config_text(state, view)
        directory = side.dir / "plugin-config" / state.uid
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "config.yaml"
        path.unlink(missing_ok=True)
        if error is not None:
            return path
        if text is None:
            if state.setup.manager is None:
                return None
            path.symlink_to(os.devnull)
            return path
        path.write_text(text, encoding="utf-8")
        return path

    def _spawn(self, state: ProgramPod, side: NodeSide, config: Path | None) -> None:
        self._stop_predecessors(state)
        root = str(side.driver.path)
        # the DaemonSet's own defaults otherwise: device discovery "auto" finds NVML as on a
        # real node ("Detected platform: nvml")
        argv = [str(self.binary), f"--driver-root={root}", f"--driver-root-ctr-path={root}"]
        if config is not None:
            argv.append(f"--config-file={config}")
        env = {k: v for k, v in state.setup.env.items() if k not in _OWN_ENV}
        # the driver's utilities (nvidia-smi, the MPS control client) come with the driver root,
        # as the container toolkit injects them into a real plugin container
        mps.lay_out(side.dir, side.driver.bin_dir)
        env.update({"PATH": f"{side.driver.bin_dir}:{SYSTEM_PATH}", "NODE_NAME": state.node})
        startup = _StartUp()
        program = Sandbox(side.dir, side.network).spawn(
            argv,
            env,
            name=f"nvdp-{state.node}",
            on_line=functools.partial(self._heard, state, startup),
            on_exit=functools.partial(self.loop.enqueue, "kubelet", ("node", state.node)),
        )
        with self._plock:
            old = self._procs.get(state.uid)
            self._procs[state.uid] = _Run(program, startup)
        program.start(replacing=old.program if old is not None else None)

    def _stop_predecessors(self, state: ProgramPod) -> None:
        """Stop a run of the same DaemonSet's earlier pod on this node before the new one
        starts: a kubelet has killed a pod's containers before the pod object goes, and the two
        would share the node's one socket path (the old one removes it as it stops)."""
        family = state.name.rpartition("-")[0]
        with self._plock:
            earlier = [
                uid
                for uid in self._procs
                if uid != state.uid
                and (pod := self.pods.get(uid)) is not None
                and (pod.node, pod.namespace) == (state.node, state.namespace)
                and pod.name.rpartition("-")[0] == family
            ]
        for uid in earlier:
            self.stop(uid)

    def _heard(self, state: ProgramPod, startup: _StartUp, line: str) -> None:
        """A line of the container's log (at its end the kubelet looks: `on_exit`)."""
        startup.saw(line)
        if self.logs is not None:
            self.logs.append(state.namespace, state.name, state.setup.main, line)

    # ---- PodRuntime hooks ---------------------------------------------------------------------

    def stop(self, uid: str) -> None:
        with self._plock:
            proc = self._procs.pop(uid, None)
        state = self.pods.get(uid)
        if proc is not None:
            proc.program.stop()
            manager = self.managers.get(state.node) if state is not None else None
            if manager is not None:  # the kubelet notices before the node's next pod starts
                manager.wait_unregistered(_STOP_GRACE)
        super().stop(uid)

    def fates(self, uid: str) -> dict[str, str | None]:
        fates = super().fates(uid)
        state = self.pods.get(uid)
        with self._plock:
            proc = self._procs.get(uid)
        if state is not None and state.started and state.main_error is None and proc is not None:
            code = proc.program.exited()
            if code is not None and not proc.program.reader.is_alive():  # its last words are logged
                fates[state.setup.main] = f"{PROGRAM} exited with code {code}"
        return fates

    def restart(self, uid: str, container: str) -> None:
        state = self.pods.get(uid)
        if state is not None and container == state.setup.main:
            with self._plock:
                proc = self._procs.pop(uid, None)
            if proc is not None:
                proc.program.stop()
        super().restart(uid, container)

    # ---- test handles -------------------------------------------------------------------------

    def program_pid(self, node: str) -> int | None:
        """NVIDIA's running process on `node`, if any."""
        with self._plock:
            procs = [
                p
                for uid, p in self._procs.items()
                if uid in self.pods and self.pods[uid].node == node
            ]
        return next((pid for pid in (p.program.pid() for p in procs) if pid is not None), None)

    def state(self, node: str) -> ProgramPod | None:
        """The plugin pod's processes on `node` (NVIDIA's own log is the container's log)."""
        pods = self.on_node(node)
        return pods[-1] if pods else None

    def busy(self) -> str | None:
        """What a settling cluster still waits for: a plugin process that has not finished
        starting, or a device list the kubelet stand-in has not published yet."""
        with self._plock:
            procs = [(uid, p) for uid, p in self._procs.items() if uid in self.pods]
        for uid, proc in procs:
            if proc.busy():
                return f"{PROGRAM} on {self.pods[uid].node}: starting its plugins"
        for name, manager in self.managers.items():
            if manager.pending():
                return f"the kubelet stand-in on {name}: a device list not published yet"
        return None

    def _publish(self, node: str, capacity: dict[str, str], allocatable: dict[str, str]) -> None:
        """The Node's capacity and allocatable as the kubelet reports them (a status patch)."""
        try:
            current = self.store.get("nodes", node).get("status") or {}
            have_capacity = current.get("capacity") or {}
            have_allocatable = current.get("allocatable") or {}
            if all(have_capacity.get(k) == v for k, v in capacity.items()) and all(
                have_allocatable.get(k) == v for k, v in allocatable.items()
            ):
                return
            body = {"status": {"capacity": capacity, "allocatable": allocatable}}
            self.store.patch("nodes", node, body, status=True)
        except ApiError:
            pass  # the node is gone
