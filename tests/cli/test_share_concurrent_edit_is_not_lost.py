"""A concurrent edit of the ConfigMap between our read and our write is never lost.

On the real control plane, through a proxy in front of the real API server (the race cannot be
timed otherwise): another writer's edit is committed to the real server just before our PUT is
forwarded, so our PUT carries a stale resourceVersion, the real server answers 409, and the
share command must read again, plan again and write both edits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.plane.faults import Fault, FaultProxy, in_front_of

Run = Callable[..., CliResult]
NAMESPACE, CONFIGMAP = "nvidia-device-plugin", "nvdp-nvidia-device-plugin-configs"
UPDATE = f"/api/v1/namespaces/{NAMESPACE}/configmaps/{CONFIGMAP}"


@pytest.fixture
def cluster(sim_cluster: MakeSimCluster) -> SimCluster:
    nodes = [NodeSpec("gpu-a", "H100-SXM5-80GB", 2)]
    return sim_cluster(nodes, "helm", {"any": "version: v1\n"}, "any")


@pytest.fixture
def proxy(cluster: SimCluster) -> Iterator[FaultProxy]:
    """A proxy in front of the cluster's API server; `cluster.kubeconfig` now points at it."""
    assert cluster.plane is not None
    with in_front_of(cluster.plane, cluster.kubeconfig) as server:
        yield server


def other_writer(cluster: SimCluster, proxy: FaultProxy, edit: Callable[[Any], None]) -> None:
    """Before our first update of the ConfigMap, someone else updates it."""

    def write() -> None:
        current = cluster.client.get("configmaps", CONFIGMAP, NAMESPACE)
        edit(current)
        cluster.client.update(current)

    proxy.add(Fault("PUT", UPDATE, before=write))


def updates(proxy: FaultProxy) -> int:
    return len([s for s in proxy.seen if s.method == "PUT" and s.path.split("?")[0] == UPDATE])


def data(cluster: SimCluster) -> dict[str, str]:
    return dict(cluster.client.get("configmaps", CONFIGMAP, NAMESPACE)["data"])


def test_another_key_added_meanwhile_survives(
    run_cli: Run, cluster: SimCluster, proxy: FaultProxy
) -> None:
    def add_key(cm: dict[str, Any]) -> None:
        cm["data"]["team-b"] = "version: v1\nflags:\n  migStrategy: none\n"

    other_writer(cluster, proxy, add_key)
    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "share", "--replicas", "3", "--wait")
    assert result.exit_code == 0, result.stderr
    assert updates(proxy) == 2  # the first PUT was refused (409) and retried after a re-read
    assert "changed while this change was planned; reading it again" in result.stderr
    stored = data(cluster)
    assert stored["team-b"] == "version: v1\nflags:\n  migStrategy: none\n"
    assert yaml.safe_load(stored["any"])["sharing"]["timeSlicing"]["resources"][0]["replicas"] == 3
    assert cluster.allocatable("gpu-a") == 6


def test_an_edit_of_the_same_key_meanwhile_is_built_upon(
    run_cli: Run, cluster: SimCluster, proxy: FaultProxy
) -> None:
    def set_flag(cm: dict[str, Any]) -> None:
        cm["data"]["any"] = "version: v1\nflags:\n  plugin:\n    deviceIDStrategy: index\n"

    other_writer(cluster, proxy, set_flag)
    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "share", "--replicas", "2")
    assert result.exit_code == 0, result.stderr
    written = yaml.safe_load(data(cluster)["any"])
    assert written["flags"] == {"plugin": {"deviceIDStrategy": "index"}}  # their edit
    assert written["sharing"]["timeSlicing"]["resources"] == [
        {"name": "nvidia.com/gpu", "replicas": 2}
    ]
