"""`SimCluster`: simulated GPU nodes on a real control plane, wired up.

Owns composition and lifetime: on a real control plane (tests/kit/plane: etcd,
kube-apiserver, controller-manager, scheduler, KWOK; the session's shared one or its own), start
the control loop and the node side (kubelet device allocation, NVIDIA's device plugin and GFD
with NFD's master, and what a test asks for: the GPU Operator and its MIG manager, the agent
processes, each with a token the server issued for its pod, NVIDIA's DRA kubelet plugin),
register the nodes (each with its GPUs in the project's libnvidia-ml), create a deployment
layout with its configs, write the kubeconfig, and stop everything without leaving threads
behind. The real DaemonSet controller and scheduler place pods and KWOK starts them. Also the
test-facing handles of the cluster as a whole: `client`, `store`, `kubeconfig`, `settle`, `deny`,
`keep_log` (those on its nodes and on what their kubelets know come from nodehandles.py and
kubeletview.py; what "settled" means is convergence.py's). Must not hold controller logic.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Collection, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.kit.cluster import convergence, nodenetworks, planeparts
from tests.kit.cluster.dcgmexporter import DcgmExporterRuntime, daemonset
from tests.kit.cluster.kubeletview import KubeletView
from tests.kit.cluster.migmanager import MigManager
from tests.kit.cluster.nodehandles import NodeHandles
from tests.kit.cluster.operator import GpuOperator
from tests.kit.kube import layouts
from tests.kit.kube.layouts import Layout
from tests.kit.node.agents import AgentRuntime, NodeKubelets, NodeSide
from tests.kit.node.nodes import NodeSpec, SimNode
from tests.kit.node.podlifecycle import Kubelet, PodRuntime
from tests.kit.node.programs import ProgramRuntime, SidecarWatch
from tests.kit.node.workloads import GpuWorkloads
from tests.kit.plane.containerlogs import LogStore
from tests.kit.plane.loop import Controller, ControlLoop
from tests.kit.plane.netns import NodeNetwork, Slot

if TYPE_CHECKING:
    from tests.kit.kube.client import KubeClient
    from tests.kit.node.draplugin import DraKubelet, DraPluginRuntime
    from tests.kit.node.nfdmaster import NfdMaster
    from tests.kit.node.nvidiagfd import NvidiaGfdRuntime
    from tests.kit.node.nvidiaplugin import NvidiaPluginRuntime
    from tests.kit.plane import ControlPlane
    from tests.kit.plane.store import ApiStore

Obj = dict[str, Any]
ALL_CONTROLLERS = ("kubelet", "device-plugin", "gfd", "gpu-operator")
# The GPU Operator's MIG manager acts only where a test asks for it: stuck-change scenarios
# set its labels by hand and must not see it act.
WITH_MIG_MANAGER = (*ALL_CONTROLLERS, "mig-manager")


class ClusterError(AssertionError):
    """A simulated controller raised; the cluster's behaviour can no longer be trusted."""


class SimCluster(NodeHandles, KubeletView):
    """A small Kubernetes cluster with NVIDIA GPU nodes, for tests and demos (the handles on
    its nodes and on what their kubelets know are in nodehandles.py and kubeletview.py)."""

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
        dcgm-exporter DaemonSet (dcgmexporter.py; needs `node_networks`). Always: the device
        plugin pods of GPU nodes run NVIDIA's own binary in the node's sandbox, and a kubelet
        stand-in per node speaking the kubelet's gRPC publishes what it advertises
        (tests/kit/node/nvidiaplugin.py; needs root, `unshare` and the built binary), and the
        GFD pods run NVIDIA's GFD, whose NodeFeature objects NFD's master (one process per
        cluster) turns into node labels (nvidiagfd.py, nfdmaster.py there). Nodes with
        `NodeSpec(dra=True)` run NVIDIA's DRA kubelet plugin instead, with `dra_feature_gates`
        (tests/kit/node/draplugin.py; the same needs)."""
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
        self.plane, self._own_plane = planeparts.plane_of(plane)
        self._admitter = planeparts.admitter_of(self.plane) if self._own_plane else None
        self.store: ApiStore = planeparts.store_of(self.plane)
        # files KWOK serves: `kubectl logs` reaches them through the real API server
        self._log_root = Path(tempfile.mkdtemp(prefix="sim-logs-"))
        self.logs: LogStore = planeparts.log_files_of(self.plane, self._log_root)
        self.url = self.plane.url
        self.loop = ControlLoop(self.store)
        specs = [NodeSpec.parse(n) if isinstance(n, str) else n for n in nodes]
        self.nodes: dict[str, SimNode] = {s.name: SimNode(s, i) for i, s in enumerate(specs)}
        self.layout = layouts.resolve(layout, configs, default_config)
        self._own_dir = None if kubeconfig else Path(tempfile.mkdtemp(prefix="sim-cluster-"))
        self.kubeconfig = kubeconfig or (self._own_dir or Path(".")) / "kubeconfig"
        gpu_nodes = [name for name, node in self.nodes.items() if node.gpus]
        dra_nodes = [name for name in gpu_nodes if self.nodes[name].spec.dra]
        # a short directory under /tmp: a unix socket path must fit in 108 bytes
        self._node_root = Path(tempfile.mkdtemp(prefix="sim", dir="/tmp"))
        # each GPU node's disk (driver root, kubelet root), for the node's own processes
        self.sides: dict[str, NodeSide] = {
            n: NodeSide(self._node_root, self.nodes[n]) for n in gpu_nodes
        }
        # NVIDIA's DRA kubelet plugin on each DRA node (NodeSpec.dra), and their kubelets' DRA side
        self.dra: DraPluginRuntime | None = None
        self.dra_kubelet: DraKubelet | None = None
        self._dra_nodes(dra_nodes, dra_feature_gates)
        self.nvidia_plugin = self._nvidia_plugin()
        # NVIDIA's GFD, its labels applied by NFD's master
        self.gfd = self._nvidia_gfd(time_scale)
        self.nfd_master: NfdMaster | None = None
        runtimes: list[PodRuntime] = []
        if "device-plugin" in controllers:
            runtimes.append(self.nvidia_plugin)
        if "gfd" in controllers:
            runtimes.append(self.gfd)
        self.agents: AgentRuntime | None = None
        self.node_kubelets: NodeKubelets | None = None
        self.want_networks = node_networks
        self.slot: Slot | None = None
        self.networks: dict[str, NodeNetwork] = {}  # filled at start
        proc_roots = {n: self._node_root / n / "proc" for n in gpu_nodes}
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
            self.store, self.loop, self.nodes, self.nvidia_plugin, runtimes,
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
        from tests.kit.node.nvidiaplugin import NvidiaPluginRuntime  # lazy: grpc and stubs

        return NvidiaPluginRuntime(self.store, self.loop, self.nodes, self.sides, self.logs)

    def _nvidia_gfd(self, time_scale: float) -> NvidiaGfdRuntime:
        """NVIDIA's own GFD in each GPU node's sandbox (tests/kit/node/nvidiagfd.py)."""
        from tests.kit.node.nvidiagfd import NvidiaGfdRuntime

        return NvidiaGfdRuntime(
            self.store, self.loop, self.nodes, self.sides, self.logs, self._pod_token, time_scale
        )

    def _start_nfd_master(self) -> None:
        """NFD's master and its CRDs where NVIDIA's GFD will run (tests/kit/node/nfdmaster.py)."""
        from tests.kit.node.nfdmaster import NfdMaster

        wanted = self.layout is not None and self.layout.gfd_daemonset is not None
        if not ("gfd" in self.controllers and wanted):
            return
        assert self.gfd.binary.is_file()  # build it now, not when the first pod starts
        self.nfd_master = NfdMaster(self.store, self.plane.kubeconfig)
        self.nfd_master.install_crds()
        self.nfd_master.start(next(iter(self.nodes)))

    def _dra_nodes(self, names: list[str], gates: Sequence[str]) -> None:
        """NVIDIA's DRA kubelet plugin in each DRA node's sandbox, with its kubelet's DRA side."""
        if not names:
            return
        for name in names:
            self.sides.setdefault(name, NodeSide(self._node_root, self.nodes[name]))
        from tests.kit.cluster import drachart  # lazy: grpc and stubs below
        from tests.kit.node.draplugin import DraKubelet, DraPluginRuntime

        def kubeconfig(node: str, path: Path) -> None:
            token = self.plane.token(drachart.SERVICE_ACCOUNT, drachart.NAMESPACE)
            self.plane.kubeconfig_for(path, token, drachart.NAMESPACE)

        account = (drachart.NAMESPACE, drachart.SERVICE_ACCOUNT)
        runtime = DraPluginRuntime({n: self.sides[n] for n in names}, kubeconfig, gates, account)

        def relook(node: str) -> None:  # the node's PodResources lists the prepared claims
            if self.node_kubelets is not None:
                self.loop.enqueue(self.node_kubelets.name, node)

        self.dra, self.dra_kubelet = runtime, DraKubelet(self.store, runtime, relook, self.loop)

    def _node_side(self, interval: float) -> AgentRuntime:
        """Each GPU node's disk (GPU state, kubelet root) and the agent processes on them."""
        sides = self.sides
        self.node_kubelets = NodeKubelets(sides, self.podresources, self.pods_in_api)
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
        if self.want_networks:  # the node side runs in them: first
            self.slot = nodenetworks.lay_out(self.plane, self.nodes, self.sides, self.networks)
        self.loop.start()
        self._started = True
        shutil.copyfile(self.plane.kubeconfig, self.kubeconfig)
        self.store.watch(planeparts.WATCHED + planeparts.WATCHED_CRDS)
        self.loop.add(planeparts.CrdWatch(self.store))
        for node in self.nodes.values():
            self.store.create(self._node_object(node))
        self.nvidia_plugin.start_managers()
        if self.nodes:
            self._start_nfd_master()
        if self.dra is not None:
            self._start_dra(self.dra)
        for obj in self.layout.objects if self.layout else ():
            planeparts.create(self.store, self._started_by_node(obj))
        if self.agents is not None and self.node_kubelets is not None:
            self.node_kubelets.start()
        if self.dcgm_exporter:
            namespace = self.layout.namespace if self.layout else "gpu-operator"
            planeparts.ensure_namespace(self.store, namespace)
            ds = daemonset(namespace, per_process=self.dcgm_exporter == "per-process")
            planeparts.create(self.store, ds)
        self.settle(timeout)
        if self.nfd_master is not None:  # GFD's first labels are on the Nodes
            self.gfd.wait_labelled(timeout)
        return self

    def _started_by_node(self, obj: Obj) -> Obj:
        """`obj`, marked where the node side starts its pods (`node_starts_programs`)."""
        if not self.node_starts_programs:
            return obj
        runtimes = (self.nvidia_plugin, self.gfd)
        return planeparts.started_by_node(obj, lambda t: any(r.owns(t) for r in runtimes))

    def _start_dra(self, runtime: DraPluginRuntime) -> None:
        from tests.kit.cluster import dranodes

        dranodes.start(runtime, partial(planeparts.create, self.store), self.store.list)

    def stop(self) -> None:
        """Stop the node side, the store's watches and a plane of the cluster's own. The loop
        and the watches stop even when a node program did not: left running, they would act on
        the next test's objects on the shared plane."""
        try:
            self._stop_node_side()
        finally:
            self._stop_control()

    def _stop_control(self) -> None:
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
        self.logs.close()  # a node program's reader may still be draining its pipe
        for root in (self._node_root, self._log_root):
            shutil.rmtree(root, ignore_errors=True)

    def _stop_node_side(self) -> None:
        """Processes first (they talk to the server, and keep their namespaces alive), then
        the namespaces, routes and relays, then the slot (the last one takes the guards)."""
        if self.agents is not None:
            self.agents.stop_all()
        if self.exporters is not None:
            self.exporters.stop_all()
        self.nvidia_plugin.stop_all()
        self.gfd.stop_all()
        if self.nfd_master is not None:
            self.nfd_master.stop()
        if self.dra is not None:
            self.dra.stop_all()
        if self.node_kubelets is not None:
            self.node_kubelets.stop()
        nodenetworks.tear_down(self.networks, self.slot)
        self.slot = None

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def client(self) -> KubeClient:
        """The official client, by name: what a test arranges and inspects the cluster with."""
        return self.plane.client

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
        quiet, self.busy = convergence.settle(self.loop, self.store, self._programs_busy, timeout)
        if self.errors:
            raise ClusterError(
                f"a simulated controller failed: {self.errors[0]!r}"
            ) from self.errors[0]
        if not quiet:
            busy = f" ({self.busy})" if self.busy else ""
            waited = max(timeout, convergence.LEAST_WAIT)
            raise TimeoutError(f"the simulated controllers were still busy after {waited} s{busy}")

    def _programs_busy(self) -> str | None:
        """What the node's programs still do (NVIDIA's plugin starting its plugins), or None."""
        return self.nvidia_plugin.busy()

    def deny(self, verb: str, resource: str, group: str = "") -> None:
        """From now on `kubeconfig`'s user is refused `verb` on `resource` (e.g. "nodes/status").
        The user becomes a ServiceAccount whose ClusterRole grants everything served but that
        (and those denied before), so the refusal is the real RBAC authorizer's 403."""
        self._denied.add((verb, resource, group))
        self.plane.user_denied("kubectl-gpu-tests-denied", self.kubeconfig, self._denied)
