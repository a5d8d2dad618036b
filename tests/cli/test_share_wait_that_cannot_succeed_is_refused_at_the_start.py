"""A `share --wait` that can never see its capacity is refused before anything is written,
instead of running out its timeout after the change: `nvidia.com/gpu` on a node whose GPUs
are all in MIG mode, a resource no selected node has, and the rollback of such a change."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

Run = Callable[..., CliResult]
MIXED = "version: v1\nflags:\n  migStrategy: mixed\n"
ALL_MIG = {0: ["3g.40gb", "3g.40gb"], 1: ["3g.40gb", "3g.40gb"]}


def share(run_cli: Run, cluster: SimCluster, *args: str) -> CliResult:
    return run_cli("--kubeconfig", str(cluster.kubeconfig), "share", *args)


def key_text(cluster: SimCluster) -> str:
    configmap = ("configmaps", "nvdp-nvidia-device-plugin-configs", "nvidia-device-plugin")
    return str(cluster.client.get(*configmap)["data"]["mixed"])


@pytest.fixture
def all_mig(sim_cluster: MakeSimCluster) -> SimCluster:
    spec = NodeSpec("gpu-a", "A100-SXM4-80GB", 2, mig=ALL_MIG)
    return sim_cluster([spec], "helm", {"mixed": MIXED}, "mixed")


def test_sharing_whole_gpus_on_an_all_mig_node_is_refused_at_the_start(
    run_cli: Run, all_mig: SimCluster
) -> None:
    for dry in ((), ("--dry-run",)):
        result = share(run_cli, all_mig, "--replicas", "2", "--wait", "--timeout", "10m", *dry)

        assert result.exit_code == 1
        assert "--wait would time out" in result.stderr
        assert (
            "  node gpu-a: every GPU is in MIG mode, so it advertises no nvidia.com/gpu to share "
            "(it advertises nvidia.com/mig-3g.40gb); share one of those with --resource"
        ) in result.stderr
        assert key_text(all_mig) == MIXED  # nothing was written
    shared = share(run_cli, all_mig, "--replicas", "2", "--resource", "nvidia.com/mig-3g.40gb",
                   "--wait", "--timeout", "10s")  # fmt: skip
    assert shared.exit_code == 0, shared.stderr
    assert all_mig.allocatable("gpu-a", "nvidia.com/mig-3g.40gb") == 8


def test_a_resource_no_selected_node_has_is_refused_and_so_is_its_rollback(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    # the rollback comes right after a share restarted the plugin: on the real plane the node's
    # allocatable is then 0 and only its capacity says what it advertises
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)], "helm", {"mixed": MIXED}, "mixed")
    mig = ("--resource", "nvidia.com/mig-1g.10gb")

    refused = share(run_cli, cluster, "--replicas", "2", *mig, "--wait", "--timeout", "10m")

    assert refused.exit_code == 1
    assert "  node gpu-a has no nvidia.com/mig-1g.10gb to share (it advertises nvidia.com/gpu)" in (
        refused.stderr
    )
    assert key_text(cluster) == MIXED
    assert share(run_cli, cluster, "--replicas", "2", *mig).exit_code == 0  # no wait: written
    assert share(run_cli, cluster, "--replicas", "3", *mig).exit_code == 0
    undo = share(run_cli, cluster, "rollback", "--wait", "--timeout", "10m")
    assert undo.exit_code == 1 and "node gpu-a has no nvidia.com/mig-1g.10gb" in undo.stderr
    assert "replicas: 3" in key_text(cluster)
