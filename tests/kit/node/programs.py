"""NVIDIA programs inside pods: the program, its config-manager init and sidecar.

Owns `ProgramPod`, the life of one pod's processes (docs/upstream-facts.md P3.2-P3.3): the init
container links a config or fails (blocking the pod), the program loads the linked config once at
start, the sidecar follows the node's `nvidia.com/device-plugin.config` label (a bad value makes it
exit while the program keeps its config; a new key means SIGHUP and an in-process reload), and
restarts after a crash re-read the file. `ProgramRuntime` is the shared base of NVIDIA's device
plugin and GFD runtimes (tests/kit/node/nvidiaplugin.py, nvidiagfd.py) and implements the
kubelet's `PodRuntime` hooks. Must not read a config (NVIDIA's binaries do) or render pod status
(podlifecycle.py).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from tests.kit.kube import ApiError
from tests.kit.node.nodes import SimNode
from tests.kit.node.podsetup import (
    EMPTY,
    ProgramSetup,
    SelectionError,
    find_main,
    select_config,
    setup_of,
)
from tests.kit.plane.loop import Change, ControlLoop
from tests.kit.plane.store import ApiStore

Obj = dict[str, Any]


@dataclass(frozen=True)
class ConfigView:
    """What config-manager and the program can see now: the label and the mounted keys."""

    label: str
    data: dict[str, str] | None  # None: the ConfigMap does not exist


@dataclass
class ProgramPod:
    """One pod's processes and what they last did."""

    uid: str
    node: str
    name: str
    namespace: str
    setup: ProgramSetup
    selected: str | None = None  # the linked key; EMPTY for /dev/null; None before any link
    label_seen: str | None = None  # the label value the sidecar last acted on
    init_error: str | None = None
    sidecar_error: str | None = None
    main_error: str | None = None
    started: bool = False  # init done, program and sidecar started
    log: list[str] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return self.started and self.main_error is None

    def fates(self) -> dict[str, str | None]:
        """Container name → None (running or completed) or why it keeps failing."""
        fates: dict[str, str | None] = {self.setup.main: self.main_error if self.started else None}
        if self.setup.init:
            fates[self.setup.init] = self.init_error
        if self.setup.sidecar:
            fates[self.setup.sidecar] = self.sidecar_error
        return fates


class ProgramRuntime:
    """Base of NVIDIA's plugin and GFD runtimes: tracks their pods through the kubelet hooks."""

    name = "program"
    container_names: Collection[str] = ()
    program = ""

    def __init__(self, store: ApiStore, loop: ControlLoop, nodes: dict[str, SimNode]) -> None:
        self.store = store
        self.loop = loop
        self.nodes = nodes
        self.pods: dict[str, ProgramPod] = {}

    # ---- PodRuntime hooks (called by the kubelet, on the loop's thread) ---------------------

    def owns(self, pod: Obj) -> bool:
        return find_main(pod, self.container_names, self.program) is not None

    def start(self, node: str, pod: Obj) -> None:
        main = find_main(pod, self.container_names, self.program)
        assert main is not None
        meta = pod["metadata"]
        state = ProgramPod(meta["uid"], node, meta["name"], meta["namespace"], setup_of(pod, main))
        self.pods[state.uid] = state
        self._init(state)
        self.changed(node)

    def stop(self, uid: str) -> None:
        state = self.pods.pop(uid, None)
        if state is not None:
            self.changed(state.node)

    def fates(self, uid: str) -> dict[str, str | None]:
        state = self.pods.get(uid)
        return state.fates() if state else {}

    def restart(self, uid: str, container: str) -> None:
        """The kubelet restarted a failed container after its back-off."""
        state = self.pods.get(uid)
        if state is None:
            return
        if container == state.setup.init:
            self._init(state)
        elif container == state.setup.sidecar:
            state.sidecar_error = None
            state.label_seen = self.view(state).label  # the informer's Add event at start
            self._sidecar_sync(state)
        elif container == state.setup.main:
            state.main_error = None
            self._load(state, self.view(state))
        self.changed(state.node)

    # ---- the config-manager -------------------------------------------------------------

    def labels_changed(self, node: str) -> None:
        """The node changed: every running sidecar on it acts if its label value moved."""
        acted = False
        for state in self.on_node(node):
            if not state.started or not state.setup.sidecar or state.sidecar_error:
                continue  # a crashed sidecar reads the label when it restarts
            label = self.view(state).label
            if label != state.label_seen:  # the informer reacts to a value change only
                state.label_seen = label
                self._sidecar_sync(state)
                acted = True
        if acted:
            self.changed(node)

    def _init(self, state: ProgramPod) -> None:
        """Init container (ONESHOT), then program and sidecar start."""
        view = self.view(state)
        state.init_error = None
        if state.setup.manager is not None:
            try:
                state.selected = self._select(state, view)
            except SelectionError as exc:
                state.init_error = str(exc)
                state.log.append(f"config-manager-init: {exc}")
                return
        state.started = True
        state.main_error = None
        self._load(state, view)
        if state.setup.sidecar:
            state.label_seen = view.label
            self._sidecar_sync(state)

    def _sidecar_sync(self, state: ProgramPod) -> None:
        view = self.view(state)
        try:
            key = self._select(state, view)
        except SelectionError as exc:
            state.sidecar_error = str(exc)  # keeps its old config (docs/upstream-facts.md P3.3)
            state.log.append(f"config-manager: {exc}")
            return
        if key == state.selected:
            state.log.append("config-manager: Already configured. Skipping update...")
            return
        if state.selected not in (None, EMPTY) and state.selected not in (view.data or {}):
            # The linked key was removed: the dangling link makes re-linking fail (#364).
            state.sidecar_error = (
                f"error creating symlink: symlink {self._src(state, key)} "
                f"{self._dst(state)}: file exists"
            )
            return
        state.selected = key
        if state.main_error is not None:
            state.sidecar_error = "error finding pid: no process found"  # nothing to SIGHUP
            return
        state.log.append(f"config-manager: Sending signal 'hangup' to '{self.program}'")
        self._load(state, view)  # SIGHUP: restarts in-process (docs/upstream-facts.md P3.3)

    def _select(self, state: ProgramPod, view: ConfigView) -> str:
        assert state.setup.manager is not None
        if view.data is None:
            raise SelectionError(
                "error getting list of configuration files: error reading directory"
            )
        return select_config(view.data, view.label, state.setup.manager)

    def _src(self, state: ProgramPod, key: str) -> str:
        manager = state.setup.manager
        return f"{manager.srcdir if manager else '/available-configs'}/{key}"

    def _dst(self, state: ProgramPod) -> str:
        return state.setup.manager.dst if state.setup.manager else "/config/config.yaml"

    # ---- reading the world ----------------------------------------------------------------

    def view(self, state: ProgramPod) -> ConfigView:
        label_key = state.setup.manager.node_label if state.setup.manager else ""
        try:
            labels = self.store.get("nodes", state.node)["metadata"].get("labels") or {}
        except ApiError:
            labels = {}
        data: dict[str, str] | None = None
        if state.setup.configmap:
            try:
                cm = self.store.get("configmaps", state.setup.configmap, state.namespace)
                data = dict(cm.get("data") or {})
            except ApiError:
                data = None
        return ConfigView(str(labels.get(label_key, "")) if label_key else "", data)

    def config_text(self, state: ProgramPod, view: ConfigView) -> tuple[str | None, str | None]:
        """(file content or None for no/empty file, read error) as the program opens it."""
        setup = state.setup
        if setup.manager is not None:
            if state.selected in (None, EMPTY):
                return None, None
            if view.data is None or state.selected not in view.data:
                return None, self._missing(self._dst(state))
            return view.data[state.selected], None
        if not setup.config_file:
            return None, None  # no config file at all: built-in defaults (static manifest)
        if setup.direct_key and view.data is not None and setup.direct_key in view.data:
            return view.data[setup.direct_key], None
        return None, self._missing(setup.config_file)

    @staticmethod
    def _missing(path: str) -> str:
        return (
            "unable to load config: unable to finalize config: unable to parse config file: "
            f"read error: open {path}: no such file or directory"
        )

    # ---- for subclasses -------------------------------------------------------------------

    def _load(self, state: ProgramPod, view: ConfigView) -> None:
        """Start (or SIGHUP-restart) the program; sets main_error."""
        raise NotImplementedError

    def changed(self, node: str) -> None:
        """Some process on `node` changed state: publish, and let the kubelet re-render."""
        self.loop.enqueue("kubelet", ("node", node))

    def on_node(self, node: str) -> list[ProgramPod]:
        # list() copies under the GIL: tests read this while the loop thread writes.
        return [s for s in list(self.pods.values()) if s.node == node]


class SidecarWatch:
    """The config-manager sidecars' node informer: label changes reach every program's pods."""

    name = "config-manager"

    def __init__(self, runtimes: Collection[ProgramRuntime]) -> None:
        self.runtimes = list(runtimes)

    def keys_for(self, change: Change) -> list[str]:
        return [change.name] if change.resource == "nodes" and change.type != "DELETED" else []

    def reconcile(self, key: object) -> None:
        for runtime in self.runtimes:
            runtime.labels_changed(str(key))
