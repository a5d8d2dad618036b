"""On the GPU Operator, a `share --node gpu-a` that has to set the ClusterPolicy's
`spec.devicePlugin.config` (the operator's default install names no ConfigMap) makes the
operator re-render its device-plugin DaemonSet, and the DaemonSet controller replaces the
plugin pod on every GPU node, not only gpu-a. The change said nothing of it; now it names every
such node and why before anything is written, its dry runs say the same, and it goes on only
with `--yes`. Where the ClusterPolicy already names the ConfigMap, only the selected node
restarts and no `--yes` is asked. Through the real kubectl on the real control plane, where
the plugin pods' uids show what actually restarted."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests.journey.fixtures import Kubectl
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(180)]
NODES = ("gpu-a", "gpu-b", "gpu-c")
SHARE = ("gpu", "share", "--replicas", "2", "--node", "gpu-a")
WHY = "the GPU Operator restarts its plugin here too"


def uids(cluster: SimCluster) -> dict[str, str]:
    return {n: str((cluster.plugin_pod(n) or {}).get("metadata", {}).get("uid")) for n in NODES}


def restarted(before: dict[str, str], cluster: SimCluster) -> list[str]:
    after = uids(cluster)
    return [n for n in NODES if after[n] != before[n]]


def policy_config(k: Kubectl) -> object:
    [policy] = json.loads(k("get", "clusterpolicies.nvidia.com", "-o", "json").stdout)["items"]
    return policy["spec"]["devicePlugin"].get("config")


def operator(sim_cluster: MakeSimCluster, configs: dict[str, str] | None) -> SimCluster:
    nodes = [NodeSpec(n, "L4", 2, gpu_taint=True) for n in NODES]
    return sim_cluster(nodes, "gpu-operator", configs, "default" if configs else None)


def test_a_cluster_policy_change_names_every_node_it_restarts_and_asks_for_yes(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl]
) -> None:
    cluster = operator(sim_cluster, None)
    k = kubectl(cluster)
    before = uids(cluster)

    runs = [k(*SHARE, "--dry-run"), k(*SHARE, "--dry-run=server"), k(*SHARE, "--wait")]

    for run in runs:
        assert run.returncode == 1, (run.args, run.stdout, run.stderr)
        said = run.stderr
        assert "restarts the device plugin on 2 node(s) it does not select: gpu-b, gpu-c" in said
        assert "rolls its device-plugin DaemonSet over every GPU node" in said
        assert f"node gpu-b: not selected, but {WHY}" in said
        assert "--yes" in said and "Traceback" not in said
    assert restarted(before, cluster) == []  # nothing deleted
    assert policy_config(k) is None  # nothing written

    listed = k(*SHARE, "--yes", "--dry-run", "-o", "wide")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()[1:]}
    assert set(rows) == set(NODES)
    assert WHY in rows["gpu-c"] and WHY not in rows["gpu-a"]

    done = k(*SHARE, "--yes", "--wait", "--timeout", "60s")

    assert done.returncode == 0, done.stderr
    cluster.settle()
    assert restarted(before, cluster) == list(NODES)  # what the plan said
    assert [cluster.allocatable(n) for n in NODES] == [4, 2, 2]


def test_with_the_cluster_policy_configured_only_the_selected_node_restarts(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl]
) -> None:
    cluster = operator(sim_cluster, {"default": "version: v1\n"})
    k = kubectl(cluster)
    before = uids(cluster)

    done = k(*SHARE, "--wait", "--timeout", "60s")

    assert done.returncode == 0, done.stderr
    cluster.settle()
    assert restarted(before, cluster) == ["gpu-a"]
    assert [cluster.allocatable(n) for n in NODES] == [4, 2, 2]
