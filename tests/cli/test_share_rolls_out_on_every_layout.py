"""`kubectl gpu share` end to end on the GPU Operator, Helm and bundle layouts.

Two GPU nodes (8 and 4 GPUs) and a CPU node, NVIDIA's own device plugin on each GPU node:
cluster-wide replicas, one node alone, off, rollback and MPS, each proven by the nodes'
allocatable as the real kubectl reads it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.conftest import ROOT, CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster, kubectl_for
from tests.workflows import sharebuilders

Run = Callable[..., CliResult]
PLAIN = "version: v1\nflags:\n  migStrategy: none\n"
NODES = [
    NodeSpec("gpu-a", "H100-SXM5-80GB", 8),
    NodeSpec("gpu-b", "A100-SXM4-80GB", 4),
    NodeSpec("cpu-1"),
]
pytestmark = pytest.mark.timeout(120)  # a real control plane under each layout
SCHEMA = jsonschema.Draft202012Validator(
    json.loads((ROOT / "schemas" / "share-result.v1.json").read_text())
)


@pytest.fixture(params=["gpu-operator", "helm", "bundle"])
def cluster(request: pytest.FixtureRequest, sim_cluster: MakeSimCluster) -> SimCluster:
    if request.param == "bundle":
        return sim_cluster(NODES, sharebuilders.bundle({"default": PLAIN}))
    return sim_cluster(NODES, request.param, {"any": PLAIN}, "any")


def share(run_cli: Run, cluster: SimCluster, *args: str) -> CliResult:
    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "share", *args)
    assert result.exception is None, result.exception
    # share may verify on the outgoing plugin's numbers (its sidecar reloaded before the pod
    # restart): look at the nodes once the node side has seen the restart through
    cluster.settle()
    return result


def allocatable(
    cluster: SimCluster, tmp_path: Path, resource: str = "nvidia.com/gpu"
) -> dict[str, int]:
    """What `kubectl get nodes -o json` says, for the GPU nodes."""
    out = kubectl_for(cluster, tmp_path)("get", "nodes", "-o", "json")
    assert out.returncode == 0, out.stderr
    nodes = json.loads(out.stdout)["items"]
    return {
        n["metadata"]["name"]: int(n["status"]["allocatable"].get(resource, 0))
        for n in nodes
        if n["metadata"]["name"].startswith("gpu-")
    }


def rows(result: CliResult) -> dict[str, dict[str, Any]]:
    document = result.json
    SCHEMA.validate(document)
    return {n["node"]: n for n in document["nodes"]}


@pytest.mark.kubectl
def test_cluster_wide_replicas_4_gives_32_and_16(
    run_cli: Run, cluster: SimCluster, tmp_path: Path
) -> None:
    assert allocatable(cluster, tmp_path) == {"gpu-a": 8, "gpu-b": 4}
    result = share(run_cli, cluster, "--replicas", "4", "--wait", "--timeout", "20s", "-o", "json")
    assert result.exit_code == 0, result.stderr
    found = rows(result)
    assert {n: (r["gpus"], r["before"], r["after"], r["result"]) for n, r in found.items()} == {
        "gpu-a": (8, 8, 32, "verified"),
        "gpu-b": (4, 4, 16, "verified"),
    }
    assert all(r["pluginPod"] for r in found.values())
    assert allocatable(cluster, tmp_path) == {"gpu-a": 32, "gpu-b": 16}
    assert "device plugin: " in result.stderr  # the detected deployment is shown


def test_table_output_lists_every_node_with_its_proof(run_cli: Run, cluster: SimCluster) -> None:
    result = share(run_cli, cluster, "--replicas", "2", "--wait", "--timeout", "20s")
    assert result.exit_code == 0, result.stderr
    header, *lines = result.stdout.splitlines()
    assert header.split() == [
        "NODE",
        "GPUS",
        "BEFORE",
        "AFTER",
        "PLUGIN",
        "POD",
        "RESULT",
        "SECONDS",
    ]
    table = {line.split()[0]: line.split() for line in lines}
    assert table["gpu-a"][1:4] == ["8", "8", "16"] and table["gpu-a"][5] == "verified"
    assert table["gpu-b"][1:4] == ["4", "4", "8"] and table["gpu-b"][5] == "verified"
    assert "2 verified" in result.stderr


def test_one_node_alone_gets_its_own_key(run_cli: Run, cluster: SimCluster) -> None:
    result = share(run_cli, cluster, "--replicas", "3", "--node", "gpu-b", "--wait", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert rows(result)["gpu-b"]["after"] == 12 and set(rows(result)) == {"gpu-b"}
    assert (cluster.allocatable("gpu-a"), cluster.allocatable("gpu-b")) == (8, 12)
    labels = cluster.client.get("nodes", "gpu-b")["metadata"]["labels"]
    assert labels["nvidia.com/device-plugin.config"] == "kubectl-gpu-ts-3"
    assert (
        "nvidia.com/device-plugin.config"
        not in cluster.client.get("nodes", "gpu-a")["metadata"]["labels"]
    )


def test_off_turns_sharing_off_again(run_cli: Run, cluster: SimCluster) -> None:
    assert share(run_cli, cluster, "--replicas", "4", "--wait").exit_code == 0
    result = share(run_cli, cluster, "off", "--wait", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert {n: r["after"] for n, r in rows(result).items()} == {"gpu-a": 8, "gpu-b": 4}
    [change] = result.json["changes"]["keys"]
    assert "sharing" not in yaml.safe_load(change["after"]) and "replicas" not in change["after"]


def test_rollback_restores_the_previous_config(run_cli: Run, cluster: SimCluster) -> None:
    assert share(run_cli, cluster, "--replicas", "4", "--wait").exit_code == 0
    assert share(run_cli, cluster, "--replicas", "2", "--node", "gpu-a", "--wait").exit_code == 0
    assert (cluster.allocatable("gpu-a"), cluster.allocatable("gpu-b")) == (16, 16)
    result = share(run_cli, cluster, "rollback", "--wait", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert (cluster.allocatable("gpu-a"), cluster.allocatable("gpu-b")) == (32, 16)
    assert (
        "nvidia.com/device-plugin.config"
        not in cluster.client.get("nodes", "gpu-a")["metadata"]["labels"]
    )
    again = share(run_cli, cluster, "rollback", "--wait")  # one change further back
    assert again.exit_code == 0, again.stderr
    assert (cluster.allocatable("gpu-a"), cluster.allocatable("gpu-b")) == (8, 4)  # unshared
    last = share(run_cli, cluster, "rollback")
    assert last.exit_code == 1 and "nothing to roll back" in last.stderr


def test_an_mps_change(run_cli: Run, cluster: SimCluster) -> None:
    result = share(run_cli, cluster, "--replicas", "2", "--mps", "--wait", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert {n: (r["strategy"], r["after"]) for n, r in rows(result).items()} == {
        "gpu-a": ("mps", 16),
        "gpu-b": ("mps", 8),
    }
    [change] = result.json["changes"]["keys"]
    written = yaml.safe_load(change["after"])
    assert written["sharing"] == {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}
    # NVIDIA's plugin found the node's MPS control daemon before it served the replicas
    said = cluster.plugin_log("gpu-a")
    assert '"mps": {' in said.rpartition("Running with config:")[2]
    assert 'MPS daemon is healthy" resource="nvidia.com/gpu"' in said
