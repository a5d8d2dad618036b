"""NVIDIA's own GPU Feature Discovery (v0.19.3, unmodified) as the process of each GFD pod.

In every simulated cluster (`SimCluster`), the pod of the layout's GFD DaemonSet (Helm chart
with GFD on, GPU Operator) on a GPU node runs NVIDIA's `gpu-feature-discovery` binary (built by
`scripts/gobins.py gpu-feature-discovery` from the device plugin's module and pin) in the node's
sandbox (sandbox.py), with `--driver-root-ctr-path` at the node's driver root (the project's
libnvidia-ml.so.1), `--config-file` holding the same config the node's plugin reads (the key the
config-manager linked, or the one `CONFIG_FILE` names), the env the chart and the operator give
it (`NODE_NAME`, `NAMESPACE`, `POD_NAME` from the pod, and the container's literal env) and a
kubeconfig with a token the API server issued for the pod's ServiceAccount (what the kubelet
mounts: its RBAC is the layout's). It writes a NodeFeature object; NFD's master (nfdmaster.py)
makes the Node's labels of it. It relabels as NVIDIA's GFD does: at start, on SIGHUP (a
config-manager switch), when its pod is restarted (`share`, the agent, the MIG manager) and
every sleep interval (the pod's `GFD_SLEEP_INTERVAL`, else the config's
`flags.gfd.sleepInterval`, else 60 s), scaled by the cluster's time scale (at least 5 s).
`/sys/class/dmi/id/product_name` is a file of the node's that does not exist, as on the H200
read in tests/data/nvidia (`gpu.machine=unknown`).

Owns `NvidiaGfdRuntime`, the GFD program of every simulated cluster: a `ProgramRuntime` whose
program is NVIDIA's process (the config-manager flow of programs.py is kept, as for the plugin; the
binary is tests/kit/kube/builds.py's to find). Must not compute labels (NVIDIA's binary does) or
write Node labels (NFD's master does).
"""

from __future__ import annotations

import functools
import os
import re
import signal
import threading
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import Any

import yaml

from tests.kit.kube import ApiError, builds
from tests.kit.node import sandbox, stopping
from tests.kit.node.agents import NodeSide
from tests.kit.node.nodes import SimNode
from tests.kit.node.programs import ConfigView, ProgramPod, ProgramRuntime
from tests.kit.node.sandbox import NodeProgram, Sandbox
from tests.kit.plane.containerlogs import LogStore
from tests.kit.plane.loop import Change, ControlLoop
from tests.kit.plane.store import ApiStore

PROGRAM = "gpu-feature-discovery"
TIMESTAMP = "nvidia.com/gfd.timestamp"  # on every labelling: the pod's labels have arrived
# Set by the runtime itself, as flags or from the pod (a stale one would mislead a reader).
_OWN_ENV = (
    "CONFIG_FILE", "GFD_CONFIG_FILE", "GFD_SLEEP_INTERVAL", "DRIVER_ROOT_CTR_PATH",
    "CONTAINER_DRIVER_ROOT", "NODE_NAME", "NAMESPACE", "POD_NAME", "KUBECONFIG",
)  # fmt: skip
DEFAULT_SLEEP = 60.0  # GFD's default --sleep-interval, seconds
# Each labelling changes `gfd.timestamp`, so each is a NodeFeature update and a Node patch:
# scaled intervals below this would keep every cluster busy (and `settle` waiting).
MIN_SLEEP = 5.0
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
Credentials = Callable[[str, str, str, Path], None]


def sleep_interval(env: dict[str, str], config: str | None) -> float | None:
    """The pod's sleep interval in seconds (None: infinite), as GFD resolves it: its env, else
    the config file's `flags.gfd.sleepInterval`, else 60 s. Unreadable values fall back to the
    default: NVIDIA's binary reports those itself."""
    value = env.get("GFD_SLEEP_INTERVAL")
    if value is None and config:
        try:
            doc = yaml.safe_load(config)
        except yaml.YAMLError:
            doc = None
        gfd = ((doc or {}).get("flags") or {}).get("gfd") if isinstance(doc, dict) else None
        if isinstance(gfd, dict) and gfd.get("sleepInterval") is not None:
            value = str(gfd["sleepInterval"])
    if value is None:
        return DEFAULT_SLEEP
    if value.strip() == "infinite":
        return None
    parts = _DURATION.findall(value.strip())
    if not parts or "".join(n + u for n, u in parts) != value.strip():
        return DEFAULT_SLEEP
    return sum(float(n) * _UNIT[u] for n, u in parts)


class NvidiaGfdRuntime(ProgramRuntime):
    """Every GPU node's GFD pod running NVIDIA's binary."""

    name = "gfd"
    container_names = ("gpu-feature-discovery-ctr", "gpu-feature-discovery")
    program = PROGRAM

    def __init__(  # noqa: PLR0913 - each argument a different part of the node side
        self,
        store: ApiStore,
        loop: ControlLoop,
        nodes: dict[str, SimNode],
        sides: dict[str, NodeSide],
        logs: LogStore | None,
        credentials: Credentials,
        time_scale: float,
    ) -> None:
        super().__init__(store, loop, nodes)
        self.time_scale = time_scale
        self.sides = sides
        self.logs = logs
        self.credentials = credentials
        self._accounts: dict[str, str] = {}  # pod UID -> its ServiceAccount
        self._procs: dict[str, NodeProgram] = {}  # pod UID -> its running program
        self._plock = threading.Lock()

    @functools.cached_property
    def binary(self) -> Path:
        """Built on first need: clusters without a GFD DaemonSet never build it."""
        return builds.program(PROGRAM)

    # ---- the program ------------------------------------------------------------------------

    def start(self, node: str, pod: dict[str, Any]) -> None:
        account = (pod.get("spec") or {}).get("serviceAccountName") or "default"
        self._accounts[pod["metadata"]["uid"]] = str(account)
        super().start(node, pod)

    def keys_for(self, change: Change) -> Iterable[Hashable]:
        return ()  # GFD reacts to its own timer and to its config-manager, not to changes

    def reconcile(self, key: Hashable) -> None:
        pass  # NVIDIA's process keeps its own timer

    def _load(self, state: ProgramPod, view: ConfigView) -> None:
        """Start NVIDIA's binary, or SIGHUP the running one after rewriting its config file."""
        state.main_error = None
        side = self.sides.get(state.node)
        if side is None:  # not a GPU node: GFD finds no NVML and exits
            state.main_error = "no GPU on this node: libnvidia-ml.so.1 not found"
            return
        text, error = self.config_text(state, view)
        directory = side.dir / "gfd-config" / state.uid
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "config.yaml"
        # as nvidiaplugin.py: a missing file where the pod's is missing (NVIDIA's binary says
        # so), no --config-file where the pod has none
        config: Path | None = None if text is None and error is None else path
        if error is not None:
            path.unlink(missing_ok=True)
        elif text is not None:
            path.write_text(text, encoding="utf-8")
        with self._plock:
            running = self._procs.get(state.uid)
        if running is not None:
            pid = running.pid()
            if pid is not None:
                os.kill(pid, signal.SIGHUP)
                return
        self._spawn(state, side, config, sleep_interval(dict(state.setup.env), text))

    def _spawn(
        self, state: ProgramPod, side: NodeSide, config: Path | None, interval: float | None
    ) -> None:
        kubeconfig = side.dir / "gfd-config" / state.uid / "kubeconfig"
        account = self._accounts.get(state.uid, "default")
        self.credentials(state.namespace, state.name, account, kubeconfig)
        root = str(side.driver.path)
        sleep = "infinite" if interval is None else f"{max(interval * self.time_scale, MIN_SLEEP)}s"
        argv = [
            str(self.binary), f"--driver-root-ctr-path={root}", f"--sleep-interval={sleep}",
            f"--machine-type-file={side.dir / 'sys' / 'class' / 'dmi' / 'id' / 'product_name'}",
        ]  # fmt: skip
        if config is not None:
            argv.append(f"--config-file={config}")
        env = {k: v for k, v in state.setup.env.items() if k not in _OWN_ENV}
        env.update(
            {
                "PATH": sandbox.SYSTEM_PATH,
                "NODE_NAME": state.node,
                "NAMESPACE": state.namespace,
                "POD_NAME": state.name,
                "KUBECONFIG": str(kubeconfig),
                # what ldconfig gives a real node's GFD container: the driver's libraries
                "LD_LIBRARY_PATH": str(side.driver.lib_dir),
            }
        )
        program = Sandbox(side.dir, side.network).spawn(
            argv,
            env,
            name=f"gfd-{state.node}",
            on_line=functools.partial(self._log_line, state),
            on_exit=functools.partial(self.loop.enqueue, "kubelet", ("node", state.node)),
        )
        with self._plock:
            old = self._procs.get(state.uid)
            self._procs[state.uid] = program
        program.start(replacing=old)

    def _log_line(self, state: ProgramPod, line: str) -> None:
        """The container's log (at its end the kubelet looks: `on_exit`)."""
        if self.logs is not None:
            self.logs.append(state.namespace, state.name, state.setup.main, line)

    # ---- PodRuntime hooks ---------------------------------------------------------------------

    def stop(self, uid: str) -> None:
        with self._plock:
            proc = self._procs.pop(uid, None)
        if proc is not None:
            proc.stop()
        self._accounts.pop(uid, None)
        super().stop(uid)

    def fates(self, uid: str) -> dict[str, str | None]:
        fates = super().fates(uid)
        state = self.pods.get(uid)
        with self._plock:
            proc = self._procs.get(uid)
        if state is not None and state.started and state.main_error is None and proc is not None:
            code = proc.exited()
            if code is not None:
                fates[state.setup.main] = f"{PROGRAM} exited with code {code}"
        return fates

    def restart(self, uid: str, container: str) -> None:
        state = self.pods.get(uid)
        if state is not None and container == state.setup.main:
            with self._plock:
                proc = self._procs.pop(uid, None)
            if proc is not None:
                proc.stop()
        super().restart(uid, container)

    def stop_all(self) -> None:
        with self._plock:
            procs = list(self._procs.values())
            self._procs.clear()
        stopping.stop_programs((p.process, p.reader) for p in procs)

    # ---- test handles -------------------------------------------------------------------------

    def program_pid(self, node: str) -> int | None:
        """NVIDIA's running GFD process on `node`, if any."""
        with self._plock:
            procs = [p for uid, p in self._procs.items() if self._on(uid, node)]
        return next((pid for pid in (p.pid() for p in procs) if pid is not None), None)

    def unlabelled(self) -> list[str]:
        """GPU nodes whose running GFD pod's labels have not reached the Node yet (the first
        labelling goes through a NodeFeature object and NFD's master: a moment after start)."""
        nodes = {s.node for s in list(self.pods.values()) if s.running and s.node in self.sides}
        missing = []
        for node in sorted(nodes):
            try:
                labels = self.store.get("nodes", node)["metadata"].get("labels") or {}
            except ApiError:
                continue  # the node is gone
            if TIMESTAMP not in labels:
                missing.append(node)
        return missing

    def wait_labelled(self, timeout: float) -> bool:
        """Wait (at most `timeout` s) until every running GFD pod's labels are on its Node."""
        return self.store.wait_until(lambda: not self.unlabelled(), timeout)

    def _on(self, uid: str, node: str) -> bool:
        state = self.pods.get(uid)
        return state is not None and state.node == node
