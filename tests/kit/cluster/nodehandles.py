"""What a test reads and changes of a simulated cluster's nodes: a base of `SimCluster`.

Owns `NodeHandles`: adding a node (its Node object as the kubelet registers it), each node's
GPUs, NVML stand-in and MIG layout, its GPU processes and /proc, its GPU state file, and the
Node's allocatable and capacity as the API server has them. Must not start or stop anything
(cluster.py does) or hold controller logic.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.kit.node.libnvml import FakeLibNvml, Gpu
from tests.kit.node.nodes import NodeSpec, SimNode
from tests.kit.node.workloads import GpuProcess, GpuWorkloads
from tests.kit.plane.kwok import NODE_SIDE_KUBELET

if TYPE_CHECKING:
    from tests.kit.node.agents import AgentRuntime
    from tests.kit.plane import ControlPlane
    from tests.kit.plane.netns import NodeNetwork
    from tests.kit.plane.store import ApiStore

Obj = dict[str, Any]


class NodeHandles:
    """The test-facing handles on a cluster's nodes (`SimCluster` sets what is declared here)."""

    store: ApiStore
    plane: ControlPlane
    controllers: tuple[str, ...]
    nodes: dict[str, SimNode]
    networks: dict[str, NodeNetwork]
    workloads: GpuWorkloads | None
    agents: AgentRuntime | None
    _node_root: Path

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
        return self._node_root / node / "proc"

    def gpu_state(self, node: str) -> Path | None:
        """`node`'s NVML state file, which every process on the node reads (agents only)."""
        side = self.agents.sides.get(node) if self.agents is not None else None
        return side.gpu_state if side is not None else None

    def allocatable(self, node: str, resource: str = "nvidia.com/gpu") -> int:
        status = self.store.get("nodes", node).get("status") or {}
        return int((status.get("allocatable") or {}).get(resource, 0))

    def capacity(self, node: str, resource: str = "nvidia.com/gpu") -> int:
        status = self.store.get("nodes", node).get("status") or {}
        return int((status.get("capacity") or {}).get(resource, 0))
