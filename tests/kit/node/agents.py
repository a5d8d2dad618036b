"""The node side of simulated GPU nodes: the real `kubectl-gpu-agent` as one OS process per node,
and a kubelet stand-in (checkpoint file + PodResources socket) per node for it to read.

Owns `NodeSide` (one directory per GPU node: its driver root with the project's
libnvidia-ml.so.1, `nvidia-smi` and the shared GPU state file, the kubelet root, the agent's
kubeconfig and heartbeat), `AgentRuntime` (the kubelet's view of the
agent container: start the process when the DaemonSet's pod starts, report it crashed when it
exits so the kubelet's back-off restarts it, stop it with its pod; its output becomes the pod's
container log) and `NodeKubelets` (keeps each node's checkpoint and PodResources answers equal to
what the simulated kubelet allocated). Must not: decide what the agent does (that is the real
`kubectl_gpu.agent`), or pass it anything a DaemonSet pod would not have.
"""

from __future__ import annotations

import functools
import os
import subprocess
import threading
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.kit.node import agentflags
from tests.kit.node.agent import agent_command
from tests.kit.node.libnvml.driver import lay_out
from tests.kit.node.nodes import SimNode
from tests.kit.node.stopping import stop_program, stop_programs
from tests.kit.plane.containerlogs import LogStore
from tests.kit.plane.loop import Change, ControlLoop
from tests.kit.plane.netns import NodeNetwork

Obj = dict[str, Any]
AGENT_PROGRAM = "kubectl-gpu-agent"
REPO_ROOT = Path(__file__).resolve().parents[3]
_STOP_GRACE = 5.0


class NodeSide:
    """Where one simulated GPU node keeps what a real node keeps on disk; also the /proc of its
    GPU processes (the agent's `--proc-root`) and its network namespace, where it has one (the
    agent then runs inside it, reachable on its pod IP, with `--usage-port`)."""

    def __init__(self, root: Path, node: SimNode) -> None:
        self.node = node
        self.dir = root / node.name
        self.proc_root = self.dir / "proc"  # the host's /proc as far as GPU processes go
        self.network: NodeNetwork | None = None  # its network namespace, when it has one
        self.kubelet_root = self.dir / "kubelet"
        self.kubeconfig = self.dir / "kubeconfig"
        self.heartbeat = self.dir / "heartbeat"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.driver = lay_out(self.dir / "driver")
        self.gpu_state = self.driver.state
        node.share_state(self.gpu_state)


@dataclass
class _Run:
    node: str
    namespace: str
    pod: str
    container: str
    args: list[str]
    service_account: str = "default"
    pod_ip: str = ""
    process: subprocess.Popen[str] | None = None
    reader: threading.Thread | None = None


class AgentRuntime:
    """The agent container of every agent pod: a `kubectl-gpu-agent` process per node."""

    name = "agent"

    def __init__(
        self,
        loop: ControlLoop,
        sides: dict[str, NodeSide],
        logs: LogStore | None,
        *,
        interval: float,
        credentials: Callable[[str, str, str, Path], None] | None = None,
    ) -> None:
        self.loop = loop
        # (namespace, pod, service account, kubeconfig path): writes the kubeconfig the pod's
        # mounted token gives it; None: the node's kubeconfig is written by the cluster once
        self.credentials = credentials
        self.sides = sides
        self.logs = logs
        self.interval = interval
        self._runs: dict[str, _Run] = {}
        self._lock = threading.Lock()

    # ---- PodRuntime hooks (called by the kubelet, on the loop's thread) ---------------------

    def owns(self, pod: Obj) -> bool:
        return _agent_container(pod) is not None

    def start(self, node: str, pod: Obj) -> None:
        container = _agent_container(pod)
        assert container is not None
        meta = pod["metadata"]
        account = str((pod.get("spec") or {}).get("serviceAccountName") or "default")
        run = _Run(
            node, meta["namespace"], meta["name"], container["name"], _args(container), account,
            str((pod.get("status") or {}).get("podIP") or ""),
        )  # fmt: skip
        with self._lock:
            self._runs[meta["uid"]] = run
        if node in self.sides:
            network = self.sides[node].network
            if network is not None and run.pod_ip:
                network.add_address(run.pod_ip)  # its pod IP, where the pod proxy reaches it
            self._spawn(run)

    def stop(self, uid: str) -> None:
        with self._lock:
            run = self._runs.pop(uid, None)
        if run is not None:
            _terminate(run)
            network = self.sides[run.node].network if run.node in self.sides else None
            if network is not None and run.pod_ip:
                network.remove_address(run.pod_ip)

    def fates(self, uid: str) -> dict[str, str | None]:
        with self._lock:
            run = self._runs.get(uid)
        if run is None:
            return {}
        if run.node not in self.sides:
            return {run.container: f"no GPU on node {run.node}: NVML cannot be initialised"}
        code = run.process.poll() if run.process else None
        return {run.container: None if code is None else f"the agent exited with code {code}"}

    def restart(self, uid: str, container: str) -> None:
        with self._lock:
            run = self._runs.get(uid)
        if run is not None and run.node in self.sides:
            self._spawn(run)

    def stop_all(self) -> None:
        with self._lock:
            runs = list(self._runs.values())
            self._runs.clear()
        stop_programs((r.process, r.reader) for r in runs if r.process is not None)

    # ---- test handles --------------------------------------------------------------------

    def pid(self, node: str) -> int | None:
        """The running agent process on `node`, if any."""
        with self._lock:
            runs = [r for r in self._runs.values() if r.node == node]
        for run in runs:
            if run.process is not None and run.process.poll() is None:
                return run.process.pid
        return None

    # ---- processes -----------------------------------------------------------------------

    def _spawn(self, run: _Run) -> None:
        side = self.sides[run.node]
        side.kubeconfig.parent.mkdir(parents=True, exist_ok=True)
        if self.credentials is not None:
            self.credentials(run.namespace, run.pod, run.service_account, side.kubeconfig)
        command = [
            *agent_command(), *run.args,
            # Where this node keeps what a pod would find mounted (last flag wins in argparse).
            "--kubeconfig", str(side.kubeconfig), "--kubelet-root", str(side.kubelet_root),
            "--heartbeat", str(side.heartbeat), "--interval", str(self.interval),
            *agentflags.usage_flags(side.proc_root, networked=side.network is not None),
        ]  # fmt: skip
        if side.network is not None:  # the node's processes run in its network namespace
            command = side.network.command(command)
        env = {
            **os.environ,
            "NODE_NAME": run.node,
            # The node's driver: the linker finds its libnvidia-ml.so.1, PATH its nvidia-smi.
            **side.driver.env(),
            "PYTHONUNBUFFERED": "1",
        }
        env.pop("KUBECONFIG", None)
        run.process = subprocess.Popen(  # noqa: S603 (fixed argv, no shell)
            command,
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        run.reader = threading.Thread(
            target=self._read, args=(run, run.process), name=f"agent-{run.node}", daemon=True
        )
        run.reader.start()

    def _read(self, run: _Run, process: subprocess.Popen[str]) -> None:
        """The container's log; at its end the process is gone, so the kubelet must look."""
        output = process.stdout
        assert output is not None
        for line in output:
            if self.logs is not None:
                self.logs.append(run.namespace, run.pod, run.container, line.rstrip("\n"))
        output.close()
        # The pipe closes while the process exits, a moment before it can be waited for: wait,
        # so that the kubelet's look at it sees it ended.
        try:
            process.wait(_STOP_GRACE)
        except subprocess.TimeoutExpired:
            pass
        self.loop.enqueue("kubelet", ("node", run.node))


def _terminate(run: _Run) -> None:
    if run.process is not None:
        stop_program(run.process, run.reader)


def _agent_container(pod: Obj) -> Obj | None:
    for container in (pod.get("spec") or {}).get("containers") or []:
        command = container.get("command") or []
        if command[:1] == [AGENT_PROGRAM]:
            return dict(container)
    return None


def _args(container: Obj) -> list[str]:
    return [str(a) for a in container.get("command", [])[1:]] + [
        str(a) for a in container.get("args") or []
    ]


class NodeKubelets:
    """Every GPU node's checkpoint and PodResources socket, following the kubelet's allocations."""

    name = "node-kubelets"

    def __init__(
        self,
        sides: dict[str, NodeSide],
        podresources: Callable[[str], tuple[list[Any], Any]],
        active: Callable[[str], set[tuple[str, str]]] | None = None,
    ) -> None:
        """`active(node)`: (namespace, name) of the node's pods the API server has now, which
        each List then keeps to (the loop's `reconcile` may come after a deletion)."""
        from tests.kit.node.kubelet import FakeKubelet  # lazy: it imports grpc and the stubs

        self._podresources = podresources
        self._active = active
        self.kubelets = {name: FakeKubelet(side.kubelet_root) for name, side in sides.items()}

    def start(self) -> None:
        for name, kubelet in self.kubelets.items():
            if self._active is not None:
                kubelet.set_active(functools.partial(self._active, name))
            kubelet.start()  # the checkpoint is written by reconcile, on the loop's thread only

    def stop(self) -> None:
        for kubelet in self.kubelets.values():
            kubelet.stop()

    def keys_for(self, change: Change) -> Iterable[Hashable]:
        if change.resource == "pods":
            node = (change.obj.get("spec") or {}).get("nodeName")
            return [node] if node in self.kubelets else []
        if change.resource == "nodes" and change.name in self.kubelets:
            return [change.name]
        return []

    def reconcile(self, key: Hashable) -> None:
        kubelet = self.kubelets.get(str(key))
        if kubelet is None:
            return
        pods, allocatable = self._podresources(str(key))
        kubelet.set_pods(pods)
        kubelet.set_allocatable(allocatable)
        kubelet.write_checkpoint()
