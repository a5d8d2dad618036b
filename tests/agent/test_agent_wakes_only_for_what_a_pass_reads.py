"""The agent's watches wake it for what a pass reads (our labels and NVIDIA's, the MIG
ConfigMap's data) and not for the churn of a busy node (status heartbeats, GFD's timestamp);
after failures, agents retry at growing, jittered delays, never in lockstep."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubectl_gpu import cluster, keys
from kubectl_gpu.agent import watches
from tests.fakes.apiserver import samples
from tests.fakes.apiserver.server import FakeApiServer
from tests.fakes.cluster import manifests as m


@pytest.fixture
def wakeups(fake_apiserver: FakeApiServer, kubeconfig: Path) -> Iterator[watches.Wakeups]:
    fake_apiserver.store.create(samples.node("gpu-1"))
    fake_apiserver.store.create(samples.node("gpu-2"))
    api = cluster.connect(str(kubeconfig))
    found = watches.Wakeups(api, "gpu-1", keys.NAMESPACE, resync=3600, retry=0.1)
    found.start()
    found.passed()
    yield found
    found.stop()


def label(server: FakeApiServer, node: str, key: str, value: str) -> None:
    server.store.patch("nodes", node, {"metadata": {"labels": {key: value}}})


def test_churn_on_the_node_does_not_wake_the_agent(
    wakeups: watches.Wakeups, fake_apiserver: FakeApiServer
) -> None:
    label(fake_apiserver, "gpu-1", keys.GFD_TIMESTAMP_LABEL, "1764100000")
    label(fake_apiserver, "gpu-1", "topology.kubernetes.io/zone", "b")
    label(fake_apiserver, "gpu-2", keys.MIG_DESIRED_LABEL, "all-balanced")  # another node
    fake_apiserver.store.patch("nodes", "gpu-1", {"status": {"allocatable": {"cpu": "3"}}})

    assert not wakeups.wait(1.5)


def test_the_desired_label_wakes_the_agent(
    wakeups: watches.Wakeups, fake_apiserver: FakeApiServer
) -> None:
    label(fake_apiserver, "gpu-1", keys.MIG_DESIRED_LABEL, "all-balanced")
    assert wakeups.wait(10)
    wakeups.passed()
    assert not wakeups.wait(0.5)  # consumed by the pass


def test_the_mig_configmap_wakes_the_agent_when_it_appears(
    wakeups: watches.Wakeups, fake_apiserver: FakeApiServer
) -> None:
    fake_apiserver.store.create(m.namespace(keys.NAMESPACE))
    fake_apiserver.store.create(
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
