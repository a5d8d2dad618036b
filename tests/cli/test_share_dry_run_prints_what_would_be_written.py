"""`--dry-run=client -o yaml` prints exactly the objects a real run writes; nothing is written
by a dry run or a diff.

On the real control plane: `--dry-run=server` is answered by the real server's admission and
storage, and which requests the CLI sent is read from the server's audit log."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from tests.cli import clirequests
from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

Run = Callable[..., CliResult]
LABEL = "nvidia.com/device-plugin.config"
NODES = [NodeSpec("gpu-a", "L4", 2), NodeSpec("gpu-b", "L4", 1)]


@pytest.fixture
def cluster(sim_cluster: MakeSimCluster) -> SimCluster:
    # The GPU Operator with no config yet: a run creates a ConfigMap and patches the policy.
    return sim_cluster(NODES, "gpu-operator")


def share(run_cli: Run, cluster: SimCluster, *args: str) -> CliResult:
    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "share", *args)
    assert result.exception is None, result.exception
    return result


def world(cluster: SimCluster) -> dict[str, Any]:
    cluster.settle()
    return {
        "configmaps": sorted(
            c["metadata"]["name"] for c in cluster.client.list("configmaps", "gpu-operator")
        ),
        "policy": cluster.client.get("clusterpolicies.nvidia.com", "cluster-policy")["spec"][
            "devicePlugin"
        ],
        "labels": {
            n: cluster.client.get("nodes", n)["metadata"]["labels"].get(LABEL)
            for n in ("gpu-a", "gpu-b")
        },
    }


def by_kind(items: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        found.setdefault(item["kind"], []).append(item)
    return found


def test_client_dry_run_prints_exactly_what_the_real_run_writes(
    run_cli: Run, cluster: SimCluster
) -> None:
    before = world(cluster)
    # the ClusterPolicy names no ConfigMap yet: the operator's roll restarts gpu-a too (--yes)
    args = ("--replicas", "4", "--node", "gpu-b", "--yes")
    dry = share(run_cli, cluster, *args, "--dry-run=client", "-o", "yaml")
    assert dry.exit_code == 0, dry.stderr
    printed = yaml.safe_load(dry.stdout)
    assert printed["kind"] == "List"
    assert world(cluster) == before  # nothing was written
    objects = by_kind(printed["items"])
    assert sorted(objects) == ["ClusterPolicy", "ConfigMap", "Node"]

    real = share(run_cli, cluster, *args, "--wait")
    assert real.exit_code == 0, real.stderr
    [configmap] = objects["ConfigMap"]
    stored = cluster.client.get("configmaps", configmap["metadata"]["name"], "gpu-operator")
    assert stored["data"] == configmap["data"]
    assert stored["metadata"]["annotations"] == configmap["metadata"]["annotations"]
    [node] = objects["Node"]
    assert node["metadata"]["name"] == "gpu-b"
    assert (
        node["metadata"]["labels"][LABEL]
        == cluster.client.get("nodes", "gpu-b")["metadata"]["labels"][LABEL]
    )
    [policy] = objects["ClusterPolicy"]
    stored_policy = cluster.client.get("clusterpolicies.nvidia.com", "cluster-policy")
    assert (
        stored_policy["spec"]["devicePlugin"]["config"] == policy["spec"]["devicePlugin"]["config"]
    )


def test_client_dry_run_as_a_table_plans_the_nodes(run_cli: Run, cluster: SimCluster) -> None:
    dry = share(run_cli, cluster, "--replicas", "3", "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    lines = [line.split() for line in dry.stdout.splitlines()[1:]]
    assert [(cells[0], cells[-2]) for cells in lines] == [
        ("gpu-a", "planned"),
        ("gpu-b", "planned"),
    ]
    assert "would write default" in dry.stderr


def test_server_dry_run_sends_dry_run_all_and_keeps_nothing(
    run_cli: Run, cluster: SimCluster
) -> None:
    before = world(cluster)
    start = clirequests.mark(cluster)
    dry = share(run_cli, cluster, "--replicas", "2", "--dry-run=server", "-o", "json")
    assert dry.exit_code == 0, dry.stderr
    items = json.loads(dry.stdout)["items"]
    assert [i["kind"] for i in items] == ["ConfigMap", "ClusterPolicy"]
    assert items[0]["metadata"].get("uid")  # as the server would have stored it
    writes = [
        r
        for r in clirequests.since(cluster, start)
        if r.split()[0] in ("create", "update", "patch", "delete", "deletecollection")
        and ("configmaps" in r or "clusterpolicies" in r or "pods" in r)
    ]
    assert writes and all("dryRun=All" in r for r in writes if "pods" not in r), writes
    assert not any("pods" in r for r in writes)  # no plugin restarted
    assert world(cluster) == before


def test_diff_shows_the_changes_and_writes_nothing(run_cli: Run, cluster: SimCluster) -> None:
    before = world(cluster)
    result = share(run_cli, cluster, "--replicas", "4", "--node", "gpu-a", "--diff")
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert (
        "--- /dev/null\n+++ b/configmap/gpu-operator/device-plugin-config/data/kubectl-gpu-ts-4\n"
        in text
    )
    assert "+      replicas: 4\n" in text
    assert f"--- a/node/gpu-a\n+++ b/node/gpu-a\n+  {LABEL}: kubectl-gpu-ts-4\n" in text
    assert "-  spec.devicePlugin.config: null\n" in text
    assert "+  spec.devicePlugin.config: {name: device-plugin-config, default: ''}\n" in text
    assert "restarts the device plugin on 1 node(s) it does not select: gpu-b" in result.stderr
    assert world(cluster) == before
