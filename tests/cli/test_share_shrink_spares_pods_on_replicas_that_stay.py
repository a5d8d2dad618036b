"""`share` judges a shrink by the replica each pod holds, as `mig apply` judges a MIG change by
the GPU each pod holds: going from 4 to 2 replicas keeps `<uuid>::0` and `::1`, so pods there
keep their devices and the change is not refused; a pod on `::2` or `::3` is named, one per
line. Without the agent's report, pods are judged by their requests."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.cli.doctorpods import gpu_pod, run_pods
from tests.cli.test_map_cluster_on_a_simulated_mig_node import publish_from_node
from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

Run = Callable[..., CliResult]


def share(run_cli: Run, cluster: SimCluster, *args: str) -> CliResult:
    return run_cli("--kubeconfig", str(cluster.kubeconfig), "share", *args)


def replicas_held(cluster: SimCluster) -> dict[str, int]:
    """pod -> the replica index of the device it holds."""
    return {a.pod: int(a.device_ids[0].rsplit("::", 1)[1]) for a in cluster.allocations("gpu-a")}


@pytest.fixture
def shared(sim_cluster: MakeSimCluster, run_cli: Run) -> SimCluster:
    """One L4 shared 4 ways, with four pods on its four replicas."""
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1, gpu_taint=True)], "gpu-operator")
    assert share(run_cli, cluster, "--replicas", "4", "--wait", "--timeout", "10s").exit_code == 0
    run_pods(cluster, *(gpu_pod(f"job-{i}", tolerate=True) for i in range(4)))
    assert sorted(replicas_held(cluster).values()) == [0, 1, 2, 3]
    return cluster


def leave_only(cluster: SimCluster, replicas: set[int]) -> None:
    """Delete the pods on other replicas, then publish the agent's report of the node."""
    for pod, replica in replicas_held(cluster).items():
        if replica not in replicas:
            cluster.client.delete("pods", pod, "default")
    cluster.settle()
    publish_from_node(cluster, "gpu-a")


def test_a_shrink_that_keeps_every_running_pods_replica_is_not_refused(
    run_cli: Run, shared: SimCluster
) -> None:
    leave_only(shared, {0, 1})

    result = share(run_cli, shared, "--replicas", "2", "--wait", "--timeout", "10s")

    assert result.exit_code == 0, result.stderr
    assert "would lose" not in result.stderr
    assert shared.allocatable("gpu-a") == 2


def test_pods_on_replicas_that_go_are_named_one_per_line(run_cli: Run, shared: SimCluster) -> None:
    leave_only(shared, {0, 2, 3})
    on = {r: p for p, r in replicas_held(shared).items()}

    result = share(run_cli, shared, "--replicas", "2")

    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    for replica in (2, 3):
        assert (
            f"  default/{on[replica]}: holds replica {replica} of GPU 0 (nvidia.com/gpu), but "
            "only replicas 0-1 remain"
        ) in lines
    assert not any(on[0] in line for line in lines)
    assert shared.allocatable("gpu-a") == 4  # nothing was written
