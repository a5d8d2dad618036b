"""`SimCluster`: the API server stand-in with simulated nodes, GPUs and controllers, wired up.

Owns composition and lifetime: start the API server, the control loop and the controllers a
test asks for (DaemonSets, scheduler, kubelet, device plugin, GFD, GPU Operator and its MIG
manager), register the
nodes (each with its NVML stand-in GPUs), create a deployment layout with its configs, write the
kubeconfig, and stop everything without leaving threads behind. Also the test-facing handles:
`store`, `server`, `kubeconfig`, `node_gpus`, `nvml`, `set_mig`, `allocations`, `plugin_pod`,
`plugin_state`, `settle`. Must not hold controller logic.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.fakes.apiserver import FakeApiServer, Store
from tests.fakes.cluster.agents import AgentRuntime, NodeKubelets, NodeSide, write_smi
from tests.fakes.cluster.allocation import Allocation
from tests.fakes.cluster.daemonsets import DaemonSetController
from tests.fakes.cluster.deviceplugin import DevicePluginRuntime
from tests.fakes.cluster.gfd import GfdRuntime
from tests.fakes.cluster.layouts import LAYOUTS, Layout
from tests.fakes.cluster.loop import Controller, ControlLoop
from tests.fakes.cluster.migmanager import MigManager
from tests.fakes.cluster.nodes import NodeSpec, SimNode
from tests.fakes.cluster.operator import GpuOperator
from tests.fakes.cluster.podlifecycle import Kubelet, PodRuntime
from tests.fakes.cluster.programs import ProgramPod, SidecarWatch
from tests.fakes.cluster.scheduler import Scheduler
from tests.fakes.libnvml import FakeLibNvml, Gpu

Obj = dict[str, Any]
ALL_CONTROLLERS = ("daemonsets", "scheduler", "kubelet", "device-plugin", "gfd", "gpu-operator")
# The GPU Operator's MIG manager acts only where a test asks for it: stuck-change scenarios
# set its labels by hand and must not see it act.
WITH_MIG_MANAGER = (*ALL_CONTROLLERS, "mig-manager")


class ClusterError(AssertionError):
    """A simulated controller raised; the cluster's behaviour can no longer be trusted."""


class SimCluster:
    """A small Kubernetes cluster with NVIDIA GPU nodes, for tests and demos."""

    def __init__(
        self,
        nodes: Sequence[NodeSpec | str] = (),
        layout: str | Layout | None = None,
        configs: Mapping[str, str] | None = None,
        default_config: str | None = None,
        controllers: Collection[str] = ALL_CONTROLLERS,
        *,
        time_scale: float = 0.02,
        kubeconfig: Path | None = None,
        agents: bool = False,
        agent_interval: float = 0.5,
    ) -> None:
        unknown = set(controllers) - set(WITH_MIG_MANAGER)
        if unknown:
            raise ValueError(f"unknown controllers {sorted(unknown)}; known: {WITH_MIG_MANAGER}")
        self.controllers = tuple(controllers)
        self.server = FakeApiServer()
        self.store: Store = self.server.store
        self.loop = ControlLoop(self.store)
        specs = [NodeSpec.parse(n) if isinstance(n, str) else n for n in nodes]
        self.nodes: dict[str, SimNode] = {s.name: SimNode(s, i) for i, s in enumerate(specs)}
        self.layout = _layout(layout, configs, default_config)
        self._own_dir = None if kubeconfig else Path(tempfile.mkdtemp(prefix="sim-cluster-"))
        self.kubeconfig = kubeconfig or (self._own_dir or Path(".")) / "kubeconfig"
        self.plugin = DevicePluginRuntime(self.store, self.loop, self.nodes)
        self.gfd = GfdRuntime(self.store, self.loop, self.nodes, time_scale)
        runtimes: list[PodRuntime] = []
        if "device-plugin" in controllers:
            runtimes.append(self.plugin)
        if "gfd" in controllers:
            runtimes.append(self.gfd)
        self.agents: AgentRuntime | None = None
        self.node_kubelets: NodeKubelets | None = None
        self._node_root: Path | None = None
        if agents:
            runtimes.append(self._node_side(agent_interval))
        self.kubelet = Kubelet(
            self.store, self.loop, self.nodes, self.plugin, runtimes,
            time_scale=time_scale, logs=self.server.logs,
        )  # fmt: skip
        self._wire(runtimes)
        self._started = False
        self._stopped = False

    def _wire(self, runtimes: list[PodRuntime]) -> None:
        namespace = self.layout.namespace if self.layout else "gpu-operator"
        wanted: dict[str, Controller] = {
            "daemonsets": DaemonSetController(self.store),
            "scheduler": Scheduler(self.store),
            "kubelet": self.kubelet,
            "gpu-operator": GpuOperator(
                self.store, namespace, mig_manager="mig-manager" in self.controllers
            ),
            "mig-manager": MigManager(self.store, self.nodes, namespace),
        }
        for name, controller in wanted.items():
            if name in self.controllers:
                self.loop.add(controller)
        if "gfd" in self.controllers:
            self.loop.add(self.gfd)
        programs = [r for r in runtimes if isinstance(r, (DevicePluginRuntime, GfdRuntime))]
        if programs:
            self.loop.add(SidecarWatch(programs))
        if self.node_kubelets is not None:
            self.loop.add(self.node_kubelets)

    def _node_side(self, interval: float) -> AgentRuntime:
        """Each GPU node's disk (GPU state, kubelet root) and the agent processes on them.

        A short directory under /tmp: a unix socket path must fit in 108 bytes."""
        self._node_root = Path(tempfile.mkdtemp(prefix="sim", dir="/tmp"))
        sides = {
            name: NodeSide(self._node_root, node) for name, node in self.nodes.items() if node.gpus
        }
        write_smi(self._node_root / "bin")
        self.node_kubelets = NodeKubelets(sides, self.podresources)
        self.agents = AgentRuntime(self.loop, sides, self.server.logs, interval=interval)
        return self.agents

    # ---- lifetime -----------------------------------------------------------------------

    def start(self, timeout: float = 10.0) -> SimCluster:
        self.server.start()
        self.loop.start()
        self._started = True
        for node in self.nodes.values():
            self.store.create(node.node_object())
        for obj in self.layout.objects if self.layout else ():
            self.store.create(obj)
        self.server.write_kubeconfig(self.kubeconfig)
        if self.agents is not None and self.node_kubelets is not None:
            for side in self.agents.sides.values():
                shutil.copyfile(self.kubeconfig, side.kubeconfig)
            self.node_kubelets.start()
        self.settle(timeout)
        return self

    def stop(self) -> None:
        """Stop the controllers and the server (the port is freed even if never started)."""
        if self.agents is not None:
            self.agents.stop_all()  # first: they talk to the server
        if self.node_kubelets is not None:
            self.node_kubelets.stop()
        if self._started:
            self.loop.stop()
            self._started = False
        if not self._stopped:
            self.server.stop()
            self._stopped = True
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)
        if self._node_root is not None:
            shutil.rmtree(self._node_root, ignore_errors=True)

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def errors(self) -> list[BaseException]:
        return [*self.loop.errors, *self.store.subscriber_errors]

    def settle(self, timeout: float = 5.0) -> None:
        """Wait until the controllers have acted on every change (back-off timers may run on)."""
        quiet = self.loop.settle(timeout)
        if self.errors:
            raise ClusterError(
                f"a simulated controller failed: {self.errors[0]!r}"
            ) from self.errors[0]
        if not quiet:
            raise TimeoutError(f"the simulated controllers were still busy after {timeout} s")

    # ---- nodes and GPUs ---------------------------------------------------------------------

    def add_node(self, spec: NodeSpec | str) -> SimNode:
        spec = NodeSpec.parse(spec) if isinstance(spec, str) else spec
        node = SimNode(spec, len(self.nodes))
        self.nodes[spec.name] = node
        self.store.create(node.node_object())
        return node

    def node_gpus(self, name: str) -> list[Gpu]:
        """The node's GPUs (the NVML stand-in's objects; change them only through set_mig)."""
        return self.nodes[name].gpus

    def nvml(self, name: str) -> FakeLibNvml:
        """The node's NVML stand-in, for a node agent under test (install it with libnvml)."""
        return self.nodes[name].nvml

    def set_mig(self, node: str, gpu_index: int, profiles: Sequence[str] | None) -> None:
        """Partition one GPU (None disables MIG); the plugin sees it at its next (re)start."""
        self.nodes[node].set_mig(gpu_index, profiles)

    # ---- what the node side knows ----------------------------------------------------------

    def allocations(self, node: str) -> list[Allocation]:
        """Kubelet's device assignments on `node` (pod UID, container, resource, device IDs)."""
        return self.kubelet.table.of_node(node)

    def advertised(self, node: str) -> dict[str, tuple[str, ...]]:
        """Device IDs the running plugin on `node` registered, per resource."""
        return {
            name: tuple(d.id for d in r.devices) for name, r in self.plugin.devices(node).items()
        }

    def podresources(self, node: str) -> tuple[list[Any], Any]:
        """`node`'s pods with their devices, and its healthy devices, as the kubelet stand-in
        (tests/fakes/kubelet.py) takes them: `set_pods(pods)`, `set_allocatable(allocatable)`."""
        from tests.fakes import kubelet as podresources  # lazy: it imports grpc and the stubs

        devices: dict[tuple[str, str], list[Any]] = {}
        for allocation in self.allocations(node):
            key = (allocation.pod_uid, allocation.container)
            devices.setdefault(key, []).append(
                podresources.Devices(allocation.resource, allocation.device_ids)
            )
        pods = []
        for pod in self.store.list("pods", field_selector=f"spec.nodeName={node}"):
            meta = pod["metadata"]
            if (pod.get("status") or {}).get("phase") != "Running":
                continue
            containers = tuple(
                podresources.Container(c["name"], tuple(devices.get((meta["uid"], c["name"]), ())))
                for c in pod["spec"]["containers"]
            )
            pods.append(podresources.Pod(meta["name"], meta["namespace"], containers, meta["uid"]))
        healthy = tuple(podresources.Devices(r, ids) for r, ids in self.advertised(node).items())
        return pods, podresources.Allocatable(devices=healthy)

    def plugin_pod(self, node: str) -> Obj | None:
        if self.layout is None:
            return None
        pods = self.store.list(
            "pods",
            self.layout.namespace,
            label_selector=self.layout.plugin_selector,
            field_selector=f"spec.nodeName={node}",
        )
        container = self.layout.plugin_container
        found = [p for p in pods if any(c["name"] == container for c in p["spec"]["containers"])]
        return found[0] if found else None

    def plugin_state(self, node: str) -> ProgramPod | None:
        """The plugin's processes on `node`: selected key, errors, log (`Running with config:`)."""
        return self.plugin.state(node)

    def restart_plugin(self, node: str) -> None:
        """Delete the plugin pod on `node` (the DaemonSet makes a new one), then settle."""
        pod = self.plugin_pod(node)
        if pod is not None:
            self.store.delete("pods", pod["metadata"]["name"], pod["metadata"]["namespace"])
        self.settle()

    def allocatable(self, node: str, resource: str = "nvidia.com/gpu") -> int:
        status = self.store.get("nodes", node).get("status") or {}
        return int((status.get("allocatable") or {}).get(resource, 0))

    def capacity(self, node: str, resource: str = "nvidia.com/gpu") -> int:
        status = self.store.get("nodes", node).get("status") or {}
        return int((status.get("capacity") or {}).get(resource, 0))


def _layout(
    layout: str | Layout | None, configs: Mapping[str, str] | None, default: str | None
) -> Layout | None:
    if layout is None or isinstance(layout, Layout):
        return layout
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
    return LAYOUTS[layout](dict(configs) if configs is not None else None, default)
