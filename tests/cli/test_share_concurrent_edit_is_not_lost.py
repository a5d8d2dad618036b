"""A concurrent edit of the ConfigMap between our read and our write is never lost.

Another writer is injected at the HTTP level: the stand-in's router commits their edit just
before our PUT reaches it, so our PUT carries a stale resourceVersion, gets 409, and the share
command must read again, plan again and write both edits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from tests.conftest import CliResult
from tests.fakes.cluster import NodeSpec, SimCluster
from tests.fakes.cluster.fixture import MakeSimCluster
from tests.fakes.cluster.fixture import sim_cluster as sim_cluster

Run = Callable[..., CliResult]
NAMESPACE, CONFIGMAP = "nvidia-device-plugin", "nvdp-nvidia-device-plugin-configs"


class OtherWriter:
    """Wraps the stand-in's router: before the first ConfigMap update, someone else edits it."""

    def __init__(self, cluster: SimCluster, edit: Callable[[dict[str, Any]], None]) -> None:
        self.router = cluster.server.router
        self.store = cluster.store
        self.edit = edit
        self.updates = 0

    def handle(self, target: Any, verb: str, request: Any) -> Any:
        if verb == "update" and target.rtype.plural == "configmaps":
            self.updates += 1
            if self.updates == 1:
                current = self.store.get("configmaps", target.name, target.namespace)
                self.edit(current)
                self.store.update(current)
        return self.router.handle(target, verb, request)


@pytest.fixture
def cluster(sim_cluster: MakeSimCluster) -> SimCluster:
    nodes = [NodeSpec("gpu-a", "H100-SXM5-80GB", 2)]
    return sim_cluster(nodes, "helm", {"any": "version: v1\n"}, "any")


def data(cluster: SimCluster) -> dict[str, str]:
    return dict(cluster.store.get("configmaps", CONFIGMAP, NAMESPACE)["data"])


def test_another_key_added_meanwhile_survives(run_cli: Run, cluster: SimCluster) -> None:
    def add_key(cm: dict[str, Any]) -> None:
        cm["data"]["team-b"] = "version: v1\nflags:\n  migStrategy: none\n"

    writer = OtherWriter(cluster, add_key)
    cluster.server.router = writer  # type: ignore[assignment]
    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "share", "--replicas", "3", "--wait")
    assert result.exit_code == 0, result.stderr
    assert writer.updates == 2  # the first PUT was refused (409) and retried after a re-read
    assert "changed while this change was planned; reading it again" in result.stderr
    stored = data(cluster)
    assert stored["team-b"] == "version: v1\nflags:\n  migStrategy: none\n"
    assert yaml.safe_load(stored["any"])["sharing"]["timeSlicing"]["resources"][0]["replicas"] == 3
    assert cluster.allocatable("gpu-a") == 6


def test_an_edit_of_the_same_key_meanwhile_is_built_upon(run_cli: Run, cluster: SimCluster) -> None:
    def set_flag(cm: dict[str, Any]) -> None:
        cm["data"]["any"] = "version: v1\nflags:\n  plugin:\n    deviceIDStrategy: index\n"

    cluster.server.router = OtherWriter(cluster, set_flag)  # type: ignore[assignment]
    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "share", "--replicas", "2")
    assert result.exit_code == 0, result.stderr
    written = yaml.safe_load(data(cluster)["any"])
    assert written["flags"] == {"plugin": {"deviceIDStrategy": "index"}}  # their edit
    assert written["sharing"]["timeSlicing"]["resources"] == [
        {"name": "nvidia.com/gpu", "replicas": 2}
    ]
