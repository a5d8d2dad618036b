"""The agent's watches wake it for what a pass reads (our labels and NVIDIA's, the MIG
ConfigMap's data) and not for the churn of a busy node (status heartbeats, GFD's timestamp);
after failures, agents retry at growing, jittered delays, never in lockstep.

On the real control plane: the watches are the real server's (with KWOK writing the nodes'
status as a kubelet would), so real watch events are what must not wake the agent."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from kubectl_gpu import cluster, keys
from kubectl_gpu.agent import watches
from tests.kit.cluster import SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import manifests as m


@pytest.fixture
def real(sim_cluster: MakeSimCluster) -> SimCluster:
    """A real cluster with nodes gpu-1 and gpu-2 (nothing simulated on them)."""
    return sim_cluster(["gpu-1", "gpu-2"])


@pytest.fixture
def wakeups(real: SimCluster) -> Iterator[watches.Wakeups]:
    api = cluster.connect(str(real.kubeconfig))
    found = watches.Wakeups(api, "gpu-1", keys.NAMESPACE, resync=3600, retry=0.1)
    found.start()
    found.passed()
    yield found
    found.stop()


def label(real: SimCluster, node: str, key: str, value: str) -> None:
    real.client.patch("nodes", node, {"metadata": {"labels": {key: value}}})


def test_churn_on_the_node_does_not_wake_the_agent(
    wakeups: watches.Wakeups, real: SimCluster
) -> None:
    label(real, "gpu-1", keys.GFD_TIMESTAMP_LABEL, "1764100000")
    label(real, "gpu-1", "topology.kubernetes.io/zone", "b")
    label(real, "gpu-2", keys.MIG_DESIRED_LABEL, "all-balanced")  # another node
    real.client.patch("nodes", "gpu-1", {"status": {"allocatable": {"cpu": "3"}}}, status=True)

    assert not wakeups.wait(1.5)


def test_the_desired_label_wakes_the_agent(wakeups: watches.Wakeups, real: SimCluster) -> None:
    label(real, "gpu-1", keys.MIG_DESIRED_LABEL, "all-balanced")
    assert wakeups.wait(10)
    wakeups.passed()
    assert not wakeups.wait(0.5)  # consumed by the pass


def test_the_mig_configmap_wakes_the_agent_when_it_appears(
    wakeups: watches.Wakeups, real: SimCluster
) -> None:
    real.client.create(m.namespace(keys.NAMESPACE))
    real.client.create(
        m.configmap(keys.MIG_CONFIGMAP, keys.NAMESPACE, {"all-balanced": "version: v1"})
    )
    assert wakeups.wait(10)


def test_retries_grow_are_bounded_and_are_spread_across_agents() -> None:
    fleet = [watches.Backoff(1.0, cap=60.0, rng=random.Random(seed)) for seed in range(50)]
    delays = [[b.next() for _ in range(10)] for b in fleet]
    for agent in delays:
        assert all(0.5 <= d <= 60.0 for d in agent)
        assert agent[3] > agent[0]  # 8 s ceiling against 1 s
    firsts = sorted(d[0] for d in delays)
    assert firsts[-1] - firsts[0] > 0.3  # 50 agents failing together do not retry together
