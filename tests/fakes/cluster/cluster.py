"""`SimCluster`: simulated GPU nodes on a real control plane, wired up.

Owns composition and lifetime: on a real control plane (tests/controlplane: etcd,
kube-apiserver, controller-manager, scheduler, KWOK; the session's shared one or its own), start
the control loop and the node side a test asks for (kubelet device allocation, device plugin,
GFD, the GPU Operator and its MIG manager, the agent processes, each with a token the server
issued for its pod), register the nodes (each with its NVML stand-in GPUs), create a deployment
layout with its configs, write the kubeconfig, and stop everything without leaving threads
behind. The real DaemonSet controller and scheduler place pods and KWOK starts them. Also the
test-facing handles: `store`, `kubeconfig`, `node_gpus`, `nvml`, `set_mig`, `allocations`,
`plugin_pod`, `plugin_state`, `settle`. Must not hold controller logic.
"""

from __future__ import annotations

import copy
import shutil
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from tests.controlplane.containerlogs import LogStore
from tests.controlplane.plane import LIFECYCLE_BY_TEST, NODE_SIDE_KUBELET
from tests.fakes.cluster.agents import AgentRuntime, NodeKubelets, NodeSide
from tests.fakes.cluster.allocation import Allocation
from tests.fakes.cluster.dcgmexporter import DcgmExporterRuntime, daemonset
from tests.fakes.cluster.gfd import GfdRuntime
from tests.fakes.cluster.layouts import LAYOUTS, Layout
from tests.fakes.cluster.loop import Controller, ControlLoop
from tests.fakes.cluster.migmanager import MigManager
from tests.fakes.cluster.netns import NodeNetwork, Slot, certified_addresses
from tests.fakes.cluster.nodes import NodeSpec, SimNode
from tests.fakes.cluster.operator import GpuOperator
from tests.fakes.cluster.podlifecycle import DevicePlugins, Kubelet, NoDevicePlugin, PodRuntime
from tests.fakes.cluster.programs import ProgramPod, ProgramRuntime, SidecarWatch
from tests.fakes.cluster.workloads import GpuProcess, GpuWorkloads
from tests.fakes.libnvml import FakeLibNvml, Gpu
from tests.kube import ApiError

if TYPE_CHECKING:
    from tests.controlplane import ControlPlane
    from tests.controlplane.admitter import Admitter
    from tests.controlplane.store import ApiStore
    from tests.fakes.node.draplugin import DraKubelet, DraPluginRuntime
    from tests.fakes.node.nfdmaster import NfdMaster
    from tests.fakes.node.nvidiagfd import NvidiaGfdRuntime
    from tests.fakes.node.nvidiaplugin import NvidiaPluginRuntime

Obj = dict[str, Any]
ALL_CONTROLLERS = ("kubelet", "device-plugin", "gfd", "gpu-operator")
# What the node side reacts to (and, on a real server, watches).
WATCHED = ("nodes", "pods", "configmaps", "daemonsets", "customresourcedefinitions")
WATCHED_CRDS = ("clusterpolicies.nvidia.com",)
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
        plane: ControlPlane | None = None,
        node_starts_programs: bool = False,
        node_networks: bool = False,
        gpu_processes: bool = False,
        dcgm_exporter: str | None = None,
        nvidia_plugin: bool = True,
        dra_feature_gates: Sequence[str] = (),
    ) -> None:
        """`node_starts_programs`: on a real control plane, the pods of the layout's device
        plugin and GFD DaemonSets are started by the node side instead of KWOK, which makes
        every pod Running and Ready at once: their whole lifecycle is then as a kubelet reports
        it (a plugin that crashes at start is never Ready; a config-manager init container
        that fails keeps its pod Pending).

        `node_networks`: every GPU node gets a network namespace of its own (netns.py; needs
        root), holding the IPs of its pods whose processes run there (the agent, dcgm-exporter)
        so the API server's pod proxy reaches them; the agent runs inside it, and reaches the
        API server through a relay on the namespace's 127.0.0.1. `gpu_processes`: running pods
        that hold GPU devices get compute processes in their node's NVML state and /proc
        (workloads.py). `dcgm_exporter`: "copied" or "per-process" runs the GPU Operator's
        dcgm-exporter DaemonSet (dcgmexporter.py; needs `node_networks`). `nvidia_plugin` (on):
        the device plugin pods of GPU nodes run NVIDIA's own binary in the node's sandbox, and a
        kubelet stand-in per node speaking the kubelet's gRPC publishes what it advertises
        (tests/fakes/node/nvidiaplugin.py; needs root, `unshare` and the built binary), and
        the GFD pods run NVIDIA's GFD, whose NodeFeature objects NFD's master (one process per
        cluster) turns into node labels (nvidiagfd.py, nfdmaster.py there); off, the plugin
        pods run no program and no node advertises a device. Nodes with `NodeSpec(dra=True)`
        run NVIDIA's DRA kubelet plugin instead, with `dra_feature_gates`
        (tests/fakes/node/draplugin.py; the same needs)."""
        if dcgm_exporter not in (None, "copied", "per-process"):
            raise ValueError(f"dcgm_exporter is copied or per-process, not {dcgm_exporter!r}")
        if dcgm_exporter and not node_networks:
            raise ValueError("dcgm_exporter serves on pod IPs: it needs node_networks")
        unknown = set(controllers) - set(WITH_MIG_MANAGER)
        if unknown:
            raise ValueError(f"unknown controllers {sorted(unknown)}; known: {WITH_MIG_MANAGER}")
        if node_starts_programs and "kubelet" not in controllers:
            raise ValueError("node_starts_programs needs the kubelet: nothing would start them")
        self.node_starts_programs = node_starts_programs
        self.controllers = tuple(controllers)
        self._denied: set[tuple[str, str, str]] = set()  # (verb, resource, group): `deny`
        self.plane, self._own_plane = _plane(plane)
        self._admitter = _admitter(self.plane) if self._own_plane else None
        self.store: ApiStore = _api_store(self.plane)
        # files KWOK serves: `kubectl logs` reaches them through the real API server
        self._log_root = Path(tempfile.mkdtemp(prefix="sim-logs-"))
        self.logs: LogStore = _log_files(self.plane, self._log_root)
        self.url = self.plane.url
        self.loop = ControlLoop(self.store)
        specs = [NodeSpec.parse(n) if isinstance(n, str) else n for n in nodes]
        self.nodes: dict[str, SimNode] = {s.name: SimNode(s, i) for i, s in enumerate(specs)}
        self.layout = _layout(layout, configs, default_config)
        self._own_dir = None if kubeconfig else Path(tempfile.mkdtemp(prefix="sim-cluster-"))
        self.kubeconfig = kubeconfig or (self._own_dir or Path(".")) / "kubeconfig"
        gpu_nodes = [name for name, node in self.nodes.items() if node.gpus]
        dra_nodes = [name for name in gpu_nodes if self.nodes[name].spec.dra]
        self._node_root: Path | None = None
        if agents or gpu_processes or dcgm_exporter or nvidia_plugin or dra_nodes:
            # a short directory under /tmp: a unix socket path must fit in 108 bytes
            self._node_root = Path(tempfile.mkdtemp(prefix="sim", dir="/tmp"))
        # each GPU node's disk (driver root, kubelet root), for the node's own processes
        self.sides: dict[str, NodeSide] = (
            {n: NodeSide(self._node_root, self.nodes[n]) for n in gpu_nodes}
            if self._node_root is not None and (agents or nvidia_plugin)
            else {}
        )
        # NVIDIA's DRA kubelet plugin on each DRA node (NodeSpec.dra), and their kubelets' DRA side
        self.dra: DraPluginRuntime | None = None
        self.dra_kubelet: DraKubelet | None = None
        self._dra_nodes(dra_nodes, dra_feature_gates)
        self.nvidia_plugin = self._nvidia_plugin() if nvidia_plugin else None
        self.plugin: DevicePlugins = self.nvidia_plugin or NoDevicePlugin()
        # with NVIDIA's plugin, NVIDIA's GFD too, its labels applied by NFD's master
        self.gfd: GfdRuntime = (
            self._nvidia_gfd(time_scale)
            if nvidia_plugin
            else GfdRuntime(self.store, self.loop, self.nodes, time_scale)
        )
        self.nfd_master: NfdMaster | None = None
        runtimes: list[PodRuntime] = []
        if "device-plugin" in controllers and self.nvidia_plugin is not None:
            runtimes.append(self.nvidia_plugin)
        if "gfd" in controllers:
            runtimes.append(self.gfd)
        self.agents: AgentRuntime | None = None
        self.node_kubelets: NodeKubelets | None = None
        self.want_networks = node_networks
        self.slot: Slot | None = None
        self.networks: dict[str, NodeNetwork] = {}  # filled at start
        proc_roots = {n: self._node_root / n / "proc" for n in gpu_nodes if self._node_root}
        if agents:
            runtimes.append(self._node_side(agent_interval))
        self.workloads = GpuWorkloads(self.nodes, proc_roots, self.store) if gpu_processes else None
        self.dcgm_exporter = dcgm_exporter
        self.exporters: DcgmExporterRuntime | None = None
        if dcgm_exporter:
            self.exporters = DcgmExporterRuntime(
                self.nodes, self.networks, self.allocations, proc_roots
            )
            runtimes.append(self.exporters)
        self.kubelet = Kubelet(
            self.store, self.loop, self.nodes, self.plugin, runtimes,
            time_scale=time_scale, logs=self.logs, workloads=self.workloads,
            networks=self.networks,
        )  # fmt: skip
        self._wire(runtimes)
        self._started = False
        self._stopped = False
        self.busy: str | None = None  # what the last settle on a real server waited for

    def _wire(self, runtimes: list[PodRuntime]) -> None:
        namespace = self.layout.namespace if self.layout else "gpu-operator"
        wanted: dict[str, Callable[[], Controller]] = {
            "kubelet": lambda: self.kubelet,
            "gpu-operator": lambda: GpuOperator(
                self.store,
                namespace,
                mig_manager="mig-manager" in self.controllers,
            ),
            "mig-manager": lambda: MigManager(
                self.store,
                self.nodes,
                namespace,
            ),
        }
        for name, make in wanted.items():
            if name in self.controllers:
                self.loop.add(make())
        if "gfd" in self.controllers:
            self.loop.add(self.gfd)
        programs = [r for r in runtimes if isinstance(r, ProgramRuntime)]
        if programs:
            self.loop.add(SidecarWatch(programs))
        if self.node_kubelets is not None:
            self.loop.add(self.node_kubelets)
        if self.dra_kubelet is not None:
            self.loop.add(self.dra_kubelet)

    def _nvidia_plugin(self) -> NvidiaPluginRuntime:
        """NVIDIA's own device plugin in each GPU node's sandbox, with its kubelet stand-in."""
        from tests.fakes.node.nvidiaplugin import NvidiaPluginRuntime  # lazy: grpc and stubs

        return NvidiaPluginRuntime(self.store, self.loop, self.nodes, self.sides, self.logs)

    def _nvidia_gfd(self, time_scale: float) -> NvidiaGfdRuntime:
        """NVIDIA's own GFD in each GPU node's sandbox (tests/fakes/node/nvidiagfd.py)."""
        from tests.fakes.node.nvidiagfd import NvidiaGfdRuntime

        return NvidiaGfdRuntime(
            self.store, self.loop, self.nodes, self.sides, self.logs, self._pod_token, time_scale
        )

    def _start_nfd_master(self) -> None:
        """NFD's master and its CRDs where NVIDIA's GFD will run (tests/fakes/node/nfdmaster.py)."""
        from tests.fakes.node.nfdmaster import NfdMaster
        from tests.fakes.node.nvidiagfd import NvidiaGfdRuntime

        wanted = self.layout is not None and self.layout.gfd_daemonset is not None
        if not (isinstance(self.gfd, NvidiaGfdRuntime) and "gfd" in self.controllers and wanted):
            return
        assert self.gfd.binary.is_file()  # build it now, not when the first pod starts
        self.nfd_master = NfdMaster(self.store, self.plane.kubeconfig)
        self.nfd_master.install_crds()
        self.nfd_master.start(next(iter(self.nodes)))

    def _dra_nodes(self, names: list[str], gates: Sequence[str]) -> None:
        """NVIDIA's DRA kubelet plugin in each DRA node's sandbox, with its kubelet's DRA side."""
        if not names or self._node_root is None:
            return
        for name in names:
            self.sides.setdefault(name, NodeSide(self._node_root, self.nodes[name]))
        from tests.fakes.cluster import drachart  # lazy: grpc and stubs below
        from tests.fakes.node.draplugin import DraKubelet, DraPluginRuntime

        def kubeconfig(node: str, path: Path) -> None:
            token = self.plane.token(drachart.SERVICE_ACCOUNT, drachart.NAMESPACE)
            self.plane.kubeconfig_for(path, token, drachart.NAMESPACE)

        runtime = DraPluginRuntime({n: self.sides[n] for n in names}, kubeconfig, gates)

        def relook(node: str) -> None:  # the node's PodResources lists the prepared claims
            if self.node_kubelets is not None:
                self.loop.enqueue(self.node_kubelets.name, node)

        self.dra, self.dra_kubelet = runtime, DraKubelet(self.store, runtime, relook, self.loop)

    def _node_side(self, interval: float) -> AgentRuntime:
        """Each GPU node's disk (GPU state, kubelet root) and the agent processes on them."""
        sides = self.sides
        self.node_kubelets = NodeKubelets(sides, self.podresources)
        self.agents = AgentRuntime(
            self.loop, sides, self.logs, interval=interval,
            credentials=self._pod_token,
        )  # fmt: skip
        return self.agents

    def _pod_token(self, namespace: str, pod: str, account: str, kubeconfig: Path) -> None:
        """What the kubelet mounts into the agent's pod: a token the server issued for its
        ServiceAccount, bound to the pod (so it carries the node-name claim)."""
        token = self.plane.token(account, namespace, bound_kind="Pod", bound_name=pod)
        self.plane.kubeconfig_for(kubeconfig, token, namespace)

    # ---- lifetime -----------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> SimCluster:
        if self.want_networks:
            self._make_networks()
        self.loop.start()
        self._started = True
        shutil.copyfile(self.plane.kubeconfig, self.kubeconfig)
        self.store.watch(WATCHED + WATCHED_CRDS)
        self.loop.add(_CrdWatch(self.store))
        for node in self.nodes.values():
            self.store.create(self._node_object(node))
        if self.nvidia_plugin is not None:
            self.nvidia_plugin.start_managers()
        if self.nodes:
            self._start_nfd_master()
        if self.dra is not None:
            self._start_dra(self.dra)
        for obj in self.layout.objects if self.layout else ():
            self._create(self._started_by_node(obj))
        if self.agents is not None and self.node_kubelets is not None:
            self.node_kubelets.start()
        if self.dcgm_exporter:
            namespace = self.layout.namespace if self.layout else "gpu-operator"
            self._ensure_namespace(namespace)
            ds = daemonset(namespace, per_process=self.dcgm_exporter == "per-process")
            self._create(ds)
        self.settle(timeout)
        if self.nfd_master is not None:  # as with the stand-in, GFD's labels are there
            cast("NvidiaGfdRuntime", self.gfd).wait_labelled(timeout)
        return self

    def _start_dra(self, runtime: DraPluginRuntime) -> None:
        from tests.fakes.cluster import dranodes

        dranodes.start(runtime, self._create, self.store.list)

    def _make_networks(self) -> None:
        """A namespace per GPU node, with a relay to the API server on its loopback."""
        self.slot = Slot.acquire()
        for name, node in self.nodes.items():
            if not node.gpus:
                continue
            network = NodeNetwork(self.slot, name, node.index)
            self.networks[name] = network
            network.create()
            network.relay_loopback(self.plane.port)
            if network.address in self.plane.kubelet_addresses:
                network.relay_loopback(self.plane.kubelet_port, inside=network.address)
            if name in self.sides:
                self.sides[name].network = network

    def _ensure_namespace(self, name: str) -> None:
        try:
            self.store.get("namespaces", name)
        except ApiError:
            self._create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def _started_by_node(self, obj: Obj) -> Obj:
        """`obj`, or a DaemonSet whose pods run a simulated program marked for the node side
        to start (`node_starts_programs`, see LIFECYCLE_BY_TEST)."""
        if not (self.node_starts_programs and obj.get("kind") == "DaemonSet"):
            return obj
        template = obj["spec"]["template"]
        if not (self.plugin.owns(template) or self.gfd.owns(template)):
            return obj
        marked = copy.deepcopy(obj)
        notes = marked["spec"]["template"].setdefault("metadata", {}).setdefault("annotations", {})
        notes[LIFECYCLE_BY_TEST] = "true"
        return marked

    def _create(self, obj: Obj, timeout: float = 20.0) -> None:
        """Create; on a real server a custom resource waits until its new CRD is served."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.store.create(obj)
                return
            except ApiError as exc:
                if exc.code not in (400, 404) or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        """Stop the node side, the store's watches and a plane of the cluster's own."""
        self._stop_node_side()
        if self._started:
            self.loop.stop()
            self._started = False
        if not self._stopped:
            self.store.close()
            if self._admitter is not None:
                self._admitter.stop()
            if self._own_plane:
                self.plane.stop()
            self._stopped = True
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)
        for root in (self._node_root, self._log_root):
            if root is not None:
                shutil.rmtree(root, ignore_errors=True)

    def _stop_node_side(self) -> None:
        """Processes first (they talk to the server, and keep their namespaces alive), then
        the namespaces, routes and relays, then the slot (the last one takes the guards)."""
        if self.agents is not None:
            self.agents.stop_all()
        if self.exporters is not None:
            self.exporters.stop_all()
        if self.nvidia_plugin is not None:
            self.nvidia_plugin.stop_all()
        if hasattr(self.gfd, "stop_all"):
            self.gfd.stop_all()
        if self.nfd_master is not None:
            self.nfd_master.stop()
        if self.dra is not None:
            self.dra.stop_all()
        if self.node_kubelets is not None:
            self.node_kubelets.stop()
        for network in self.networks.values():
            network.destroy()
        self.networks.clear()
        if self.slot is not None:
            self.slot.release()
            self.slot = None

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def owns_plane(self) -> bool:
        return self._own_plane

    @property
    def errors(self) -> list[BaseException]:
        return [*self.loop.errors, *self.store.subscriber_errors]

    def settle(self, timeout: float = 5.0) -> None:
        """Wait until the controllers have acted on every change (back-off timers may run on).

        And until the real controllers are done: every DaemonSet's pods are placed and every
        pod is bound and started (or reported unschedulable), and every watched object's last
        revision has reached the node side."""
        quiet = self._settle_real(timeout)
        if self.errors:
            raise ClusterError(
                f"a simulated controller failed: {self.errors[0]!r}"
            ) from self.errors[0]
        if not quiet:
            busy = f" ({self.busy})" if self.busy else ""
            raise TimeoutError(f"the simulated controllers were still busy after {timeout} s{busy}")

    def _settle_real(self, timeout: float) -> bool:
        deadline = time.monotonic() + max(timeout, 30.0)
        calm = 0
        while time.monotonic() < deadline:
            left = deadline - time.monotonic()
            self.busy = "the node side" if not self.loop.settle(left) else _unconverged(self.store)
            if self.busy is None and self.nvidia_plugin is not None:
                self.busy = self.nvidia_plugin.busy()
            if self.busy is None and not self.store.synced():
                self.busy = "watch events still on their way"
            calm = calm + 1 if self.busy is None and self.loop.settle(0) else 0
            if calm >= 2:  # twice in a row: nothing was in flight between the two looks
                return True
            time.sleep(0.1)
        return False

    def deny(self, verb: str, resource: str, group: str = "") -> None:
        """From now on `kubeconfig`'s user is refused `verb` on `resource` (e.g. "nodes/status").
        The user becomes a ServiceAccount whose ClusterRole grants everything served but that
        (and those denied before), so the refusal is the real RBAC authorizer's 403."""
        self._denied.add((verb, resource, group))
        self.plane.user_denied("kubectl-gpu-tests-denied", self.kubeconfig, self._denied)

    def keep_log(
        self, namespace: str, pod: str, container: str, text: str, previous: bool = False
    ) -> None:
        """The node keeps `text` as the container's log; return once the API server serves it
        (KWOK sees a new `Logs` object a moment after it is written)."""
        self.logs.set(namespace, pod, container, text, previous=previous)
        query = urllib.parse.urlencode({"container": container, "previous": str(previous).lower()})
        path = f"/api/v1/namespaces/{namespace}/pods/{pod}/log?{query}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if self.store.request("GET", path) == text:
                    return
            except ApiError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"the log of {namespace}/{pod} {container} was not served in 30 s")

    # ---- nodes and GPUs ---------------------------------------------------------------------

    def add_node(self, spec: NodeSpec | str) -> SimNode:
        spec = NodeSpec.parse(spec) if isinstance(spec, str) else spec
        node = SimNode(spec, len(self.nodes))
        self.nodes[spec.name] = node
        self.store.create(self._node_object(node))
        return node

    def _node_object(self, node: SimNode) -> Obj:
        """The node's kubelet endpoint is KWOK's server (container logs); a node with a network
        namespace whose address KWOK's certificate names has that InternalIP, relayed there."""
        obj = self.plane.with_kubelet(node.node_object())
        if "kubelet" in self.controllers:  # its pods start once this node's kubelet admitted them
            obj["metadata"].setdefault("annotations", {})[NODE_SIDE_KUBELET] = "simulated"
        network = self.networks.get(node.name)
        if network is not None and network.address in self.plane.kubelet_addresses:
            for address in obj["status"]["addresses"]:
                if address["type"] == "InternalIP":
                    address["address"] = network.address
        return obj

    def node_gpus(self, name: str) -> list[Gpu]:
        """The node's GPUs (the NVML stand-in's objects; change them only through set_mig)."""
        return self.nodes[name].gpus

    def nvml(self, name: str) -> FakeLibNvml:
        """The node's NVML stand-in, for a node agent under test (install it with libnvml)."""
        return self.nodes[name].nvml

    def set_mig(self, node: str, gpu_index: int, profiles: Sequence[str] | None) -> None:
        """Partition one GPU (None disables MIG); the plugin sees it at its next (re)start."""
        self.nodes[node].set_mig(gpu_index, profiles)

    # ---- GPU processes and node networks ---------------------------------------------------

    def gpu_processes(self, node: str) -> list[GpuProcess]:
        """The compute processes on `node` (of its GPU pods, and strays)."""
        assert self.workloads is not None, "start the cluster with gpu_processes=True"
        return self.workloads.processes(node)

    def add_stray_process(
        self,
        node: str,
        gpu_index: int,
        used_bytes: int,
        *,
        mig_device: tuple[int, int] | None = None,
        sm_percent: int | None = None,
        cgroup_path: str = "/system.slice/gpu-burn.service",
    ) -> GpuProcess:
        """A compute process of no pod on `node` (see GpuWorkloads.add_stray)."""
        assert self.workloads is not None, "start the cluster with gpu_processes=True"
        return self.workloads.add_stray(
            node, gpu_index, used_bytes, mig_device=mig_device, sm_percent=sm_percent,
            cgroup_path=cgroup_path,
        )  # fmt: skip

    def proc_root(self, node: str) -> Path:
        """Where `node`'s /proc is, as far as its GPU processes go (the agent's --proc-root)."""
        assert self._node_root is not None
        return self._node_root / node / "proc"

    def gpu_state(self, node: str) -> Path | None:
        """`node`'s NVML state file, which every process on the node reads (agents only)."""
        side = self.agents.sides.get(node) if self.agents is not None else None
        return side.gpu_state if side is not None else None

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
            claims = self._prepared_claims(pod)
            containers = tuple(
                podresources.Container(
                    c["name"],
                    tuple(devices.get((meta["uid"], c["name"]), ())),
                    alloc_resp=self._alloc_resp(meta["uid"], c["name"]),
                    claims=claims.get(c["name"], ()),
                )
                for c in pod["spec"]["containers"]
            )
            pods.append(podresources.Pod(meta["name"], meta["namespace"], containers, meta["uid"]))
        healthy = tuple(podresources.Devices(r, ids) for r, ids in self.advertised(node).items())
        return pods, podresources.Allocatable(devices=healthy)

    def _prepared_claims(self, pod: Obj) -> dict[str, tuple[Any, ...]]:
        """Container -> the DRA claims NVIDIA's kubelet plugin prepared for it (PodResources)."""
        if self.dra_kubelet is None:
            return {}
        from tests.fakes.node.draplugin import podresources_claims

        return podresources_claims(self.dra_kubelet, pod)

    def _alloc_resp(self, uid: str, container: str) -> Any:
        """What NVIDIA's plugin answered Allocate for a container (None: it answered none).
        The kubelet stand-in keeps one answer per container."""
        if self.nvidia_plugin is None:
            return None
        from tests.fakes.node.deviceallocation import checkpoint_response

        found = [
            r for (u, c, _), r in self.nvidia_plugin.responses.items() if (u, c) == (uid, container)
        ]
        return checkpoint_response(found[0]) if found else None

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
        """The plugin pod's processes on `node`: selected key, errors (NVIDIA's own words are
        in the container's log, `cluster.logs`)."""
        return self.nvidia_plugin.state(node) if self.nvidia_plugin is not None else None

    def plugin_log(self, node: str, previous: bool = False) -> str:
        """What `kubectl logs` shows of the plugin container on `node` (NVIDIA's own output,
        and the reason the kubelet stand-in wrote where it exited)."""
        pod, state = self.plugin_pod(node), self.plugin_state(node)
        if pod is None or state is None:
            return ""
        meta = pod["metadata"]
        text = self.logs.get(meta["namespace"], meta["name"], state.setup.main, previous)
        return text or ""

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


def _plane(plane: ControlPlane | None) -> tuple[ControlPlane, bool]:
    from tests.controlplane import ControlPlane

    if plane is not None:
        return plane, False
    return ControlPlane(kubelet_addresses=certified_addresses(), node_side_gate=True).start(), True


def _admitter(plane: ControlPlane) -> Admitter:
    """Admits at once the pods of nodes without a kubelet stand-in (DRA nodes) on a plane of
    the cluster's own."""
    from tests.controlplane.admitter import Admitter

    assert plane.creds is not None
    return Admitter(plane.url, plane.creds.admin_token, plane.creds.ca_cert).start()


def _log_files(plane: ControlPlane, directory: Path) -> LogStore:
    from tests.controlplane.containerlogs import ContainerLogFiles

    return ContainerLogFiles(plane, directory)


def _api_store(plane: ControlPlane) -> ApiStore:
    from tests.controlplane.store import ApiStore

    assert plane.creds is not None
    return ApiStore(plane.url, plane.creds.admin_token, plane.creds.ca_cert)


def _unconverged(store: Any) -> str | None:
    """What the real controllers have not caught up with yet (namespaces deleted, DaemonSets'
    pods placed, pods bound and started or reported unschedulable), or None."""
    for namespace in store.list("namespaces"):
        if namespace["metadata"].get("deletionTimestamp"):
            return f"namespace {namespace['metadata']['name']}: being deleted"
    for ds in store.list("daemonsets"):
        status, meta = ds.get("status") or {}, ds["metadata"]
        where = f"daemonset {meta['namespace']}/{meta['name']}"
        if (status.get("observedGeneration") or 0) < meta.get("generation", 0):
            return f"{where}: not observed yet"
        placed, desired = (
            status.get(k, 0) for k in ("currentNumberScheduled", "desiredNumberScheduled")
        )
        if placed != desired:
            return f"{where}: {placed} of {desired} pods placed"
    return next(filter(None, map(_pod_unsettled, store.list("pods"))), None)


def _pod_unsettled(pod: Obj) -> str | None:
    meta, status = pod["metadata"], pod.get("status") or {}
    where = f"pod {meta['namespace']}/{meta['name']}"
    if meta.get("deletionTimestamp"):
        return f"{where}: being deleted"
    if pod["spec"].get("nodeName"):  # started: Running, or Pending with its containers told of
        started = status.get("phase") != "Pending" or status.get("containerStatuses")
        return None if started else f"{where}: bound, not started"
    unschedulable = any(
        c.get("type") == "PodScheduled" and c.get("status") == "False"
        for c in status.get("conditions") or []
    )
    return None if unschedulable else f"{where}: not scheduled yet"


class _CrdWatch:
    """A CRD we react to appeared: start watching its objects."""

    name = "crd-watch"

    def __init__(self, store: ApiStore) -> None:
        self.store = store

    def keys_for(self, change: Any) -> list[str]:
        if change.resource == "customresourcedefinitions" and change.type != "DELETED":
            return [change.name] if change.name in WATCHED_CRDS else []
        return []

    def reconcile(self, key: object) -> None:
        for _ in range(50):  # the CRD is served a moment after it is created
            if self.store.watching(str(key)):
                return
            self.store.watch([str(key)])
            time.sleep(0.1)


def _layout(
    layout: str | Layout | None, configs: Mapping[str, str] | None, default: str | None
) -> Layout | None:
    if layout is None or isinstance(layout, Layout):
        return layout
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
    return LAYOUTS[layout](dict(configs) if configs is not None else None, default)
