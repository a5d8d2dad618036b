"""`share show` on a node whose config shares `nvidia.com/mig-1g.10gb` (time-slicing MIG
devices): it reports that resource, its replicas and capacity, where it used to report
`nvidia.com/gpu` × 1 whatever the node shared. `--resource` still picks one for every node."""

from __future__ import annotations

from kubectl_gpu.sharing import rollout
from kubectl_gpu.sharing.rollout import PluginPod
from tests.workflows.sharebuilders import gpu_node, helm, state, ts

RUNNING = PluginPod("plugin-a", "Running", True, 0)
MIG = "nvidia.com/mig-1g.10gb"


def row(resource: str | None) -> rollout.NodeStatus:
    node = gpu_node("a", 7, replicas=2, resource=MIG)
    [found] = rollout.survey(
        state(helm(), {"any": ts(2, MIG)}, [node]), {"a": RUNNING}, {}, resource
    )
    return found


def test_a_node_sharing_a_mig_resource_is_reported_on_it() -> None:
    shown = row(None)

    assert (shown.resource, shown.replicas, shown.gpus, shown.allocatable) == (MIG, 2, 7, 14)
    assert shown.problems == ()
    assert shown.explain().startswith(
        f"key any (default): 7 physical device(s) × 2 time-slicing replicas = 14 {MIG}"
    )


def test_a_resource_asked_for_is_the_one_reported() -> None:
    shown = row("nvidia.com/gpu")

    assert (shown.resource, shown.replicas) == ("nvidia.com/gpu", 1)
