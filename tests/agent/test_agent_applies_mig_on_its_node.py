"""The agent on a simulated node: H100 without a reset, A100 with one, the plugin restarted and
the node's `nvidia.com/mig-*` allocatable updated."""

from __future__ import annotations

from kubectl_gpu import keys
from kubectl_gpu.mig.apply import Start
from tests.agent.fixtures import Agent, ask, labels, notes, store_config
from tests.cli import clirequests
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import layouts

BALANCED = {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
WRITES = ("create", "update", "patch", "delete", "deletecollection")


def _mixed() -> layouts.Layout:
    return layouts.helm(env={"MIG_STRATEGY": "mixed"})


def test_h100_is_partitioned_without_a_reset_and_allocatable_follows(
    sim_cluster: MakeSimCluster, agent: Agent
) -> None:
    cluster = sim_cluster(["gpu-1=H100-SXM5-80GB:1"], _mixed())
    old_pod = cluster.plugin_pod("gpu-1")
    store_config(cluster, "balanced", BALANCED)
    ask(cluster, "gpu-1", "balanced")

    assert agent(cluster, "gpu-1") is Start.CONFIGURE

    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "success"
    assert cluster.allocatable("gpu-1", "nvidia.com/mig-1g.10gb") == 2
    assert cluster.allocatable("gpu-1", "nvidia.com/mig-3g.40gb") == 1
    assert cluster.allocatable("gpu-1", "nvidia.com/gpu") == 0
    new_pod = cluster.plugin_pod("gpu-1")
    assert old_pod and new_pod and old_pod["metadata"]["uid"] != new_pod["metadata"]["uid"]
    assert notes(cluster, "gpu-1")[keys.MIG_APPLIED_ANNOTATION].startswith("balanced@")
    assert "ResetGpu" not in str(cluster.nvml("gpu-1").calls)
    # at rest the next pass changes nothing and writes nothing (the server's audit log: on a
    # real server the node side writes the Node on its own, so its resourceVersion moves)
    start = clirequests.mark(cluster)
    assert agent(cluster, "gpu-1") is Start.NOTHING
    sent = clirequests.since(cluster, start)
    assert sent and not [r for r in sent if r.split()[0] in WRITES], sent


def test_a100_mode_change_is_activated_by_resetting_only_that_gpu(
    sim_cluster: MakeSimCluster, agent: Agent
) -> None:
    cluster = sim_cluster(["gpu-1=A100-SXM4-40GB:2"], _mixed())
    store_config(cluster, "one", {"3g.20gb": 2})
    ask(cluster, "gpu-1", "one")
    lib = cluster.nvml("gpu-1")
    resets: list[int] = []

    def reset(index: int, bus: str) -> None:
        resets.append(index)
        assert lib.reset(index) == 0

    agent(cluster, "gpu-1", reset=reset)

    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "success"
    assert sorted(resets) == [0, 1]
    assert cluster.allocatable("gpu-1", "nvidia.com/mig-3g.20gb") == 4


def test_a100_without_a_possible_reset_reports_reboot_required(
    sim_cluster: MakeSimCluster, agent: Agent
) -> None:
    cluster = sim_cluster(["gpu-1=A100-SXM4-40GB:1"], _mixed())
    store_config(cluster, "one", {"3g.20gb": 2})
    ask(cluster, "gpu-1", "one")

    agent(cluster, "gpu-1")

    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "reboot-required"
    assert "reboot" in notes(cluster, "gpu-1")[keys.MIG_REASON_ANNOTATION]
    assert cluster.plugin_pod("gpu-1") is not None
    # after the reboot the mode is on: the next pass finishes the job
    cluster.nvml("gpu-1").reboot()
    assert agent(cluster, "gpu-1") is Start.CONFIGURE
    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "success"
    assert cluster.allocatable("gpu-1", "nvidia.com/mig-3g.20gb") == 2
