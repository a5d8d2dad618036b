"""A `share` stopped after its ConfigMap write and one node's restart (Ctrl-C while waiting for
the next), through the real kubectl on the bundle with its agents: gpu-a runs the new config,
gpu-b the old. `share show` used to see nothing wrong (`? physical device(s)`: the bundle runs
no GFD to count GPUs) and running the same command again reported `unchanged` without
restarting gpu-b. Now the GPU count comes from the agents' reports, so `share show` says gpu-b
runs another config and the same command restarts it until both nodes advertise 2 × 2."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from kubectl_gpu import bundle, keys
from tests.journey.fixtures import Kubectl
from tests.journey.test_headline_journey_through_kubectl import eventually
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(240)]


def rows(k: Kubectl) -> dict[str, dict[str, Any]]:
    shown = k("gpu", "share", "show", "-o", "json")
    assert shown.returncode in (0, 1), shown.stderr
    return {r["node"]: r for r in json.loads(shown.stdout)["nodes"]}


def test_the_same_command_again_restarts_the_node_still_on_the_old_config(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl]
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 2), NodeSpec("gpu-b", "L4", 2)], agents=True)
    k = kubectl(cluster)
    assert k("gpu", "install").returncode == 0
    assert eventually(lambda: k("gpu", "status").returncode == 0), k("gpu", "status").stderr
    # what the interrupted run left: the key written, gpu-a's plugin restarted, gpu-b's not
    written = k("gpu", "share", "--replicas", "2", "--no-restart")
    assert written.returncode == 0, written.stderr
    selector = f"{keys.APP_NAME_LABEL}={bundle.DEVICE_PLUGIN}"
    restarted = k("delete", "pod", "-n", keys.NAMESPACE, "-l", selector,
                  "--field-selector", "spec.nodeName=gpu-a")  # fmt: skip
    assert restarted.returncode == 0, restarted.stderr
    assert eventually(lambda: cluster.allocatable("gpu-a") == 4)
    assert cluster.allocatable("gpu-b") == 2

    found = rows(k)

    assert found["gpu-b"]["gpus"] == 2  # counted by the agent's report
    assert any("the plugin runs another config" in p for p in found["gpu-b"]["problems"])
    assert not any("another config" in p for p in found["gpu-a"]["problems"])

    again = k("gpu", "share", "--replicas", "2", "--wait", "--timeout", "90s", "-o", "json")

    assert again.returncode == 0, again.stderr
    results = {r["node"]: r["result"] for r in json.loads(again.stdout)["nodes"]}
    assert results["gpu-b"] != "unchanged", again.stdout
    assert cluster.allocatable("gpu-a") == cluster.allocatable("gpu-b") == 4
