"""`share --wait` is refused at the start when it can never succeed, also on a node whose device
plugin is restarting: kubelet then keeps the node's capacity and sets its allocatable to 0
(right after the previous `share` restarted the plugin, on every real cluster), and the
capacity still says which resources the node advertises."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kubectl_gpu.sharing.rollout import waits
from kubectl_gpu.sharing.rollout.nodes import GpuNode

MIG = "nvidia.com/mig-1g.10gb"


def node(capacity: dict[str, int], allocatable: dict[str, int]) -> GpuNode:
    return GpuNode("gpu-a", {}, capacity, allocatable)


def problems(gpu_node: GpuNode, resource: str) -> list[str]:
    state: Any = SimpleNamespace(node=lambda name: gpu_node if name == gpu_node.name else None)
    plan: Any = SimpleNamespace(nodes=[SimpleNamespace(node="gpu-a", resource=resource)])
    return waits.problems(state, plan)


def test_a_node_whose_plugin_restarts_is_judged_by_its_capacity() -> None:
    restarting = node({"nvidia.com/gpu": 1}, {"nvidia.com/gpu": 0})

    assert problems(restarting, MIG) == [
        f"node gpu-a has no {MIG} to share (it advertises nvidia.com/gpu; none allocatable now: "
        "its plugin is restarting or its GPUs are unhealthy)"
    ]
    assert problems(restarting, "nvidia.com/gpu") == []  # its GPUs come back with the plugin


def test_a_node_whose_plugin_never_advertised_is_left_to_the_wait() -> None:
    assert problems(node({}, {}), MIG) == []
    assert problems(node({"nvidia.com/gpu": 0}, {"nvidia.com/gpu": 0}), MIG) == []


def test_a_running_plugin_is_judged_by_allocatable_as_before() -> None:
    all_mig = node({"nvidia.com/gpu": 0, MIG: 7}, {"nvidia.com/gpu": 0, MIG: 7})

    assert problems(all_mig, "nvidia.com/gpu") == [
        "node gpu-a: every GPU is in MIG mode, so it advertises no nvidia.com/gpu to share "
        f"(it advertises {MIG}); share one of those with --resource"
    ]
    assert problems(all_mig, MIG + ".shared") == []
