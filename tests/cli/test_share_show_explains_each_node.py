"""`kubectl gpu share show` tells what each node reads and why capacity is what it is."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import ROOT, CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster, kubectl_for
from tests.workflows.sharebuilders import ts

Run = Callable[..., CliResult]
pytestmark = pytest.mark.timeout(120)  # clusters on the real control plane
NAMESPACE, CONFIGMAP = "nvidia-device-plugin", "nvdp-nvidia-device-plugin-configs"
SCHEMA = jsonschema.Draft202012Validator(
    json.loads((ROOT / "schemas" / "share-result.v1.json").read_text())
)


@pytest.fixture
def cluster(sim_cluster: MakeSimCluster) -> SimCluster:
    nodes = [NodeSpec("gpu-a", "L4", 2), NodeSpec("gpu-b", "L4", 2)]
    return sim_cluster(nodes, "helm", {"any": "version: v1\n"}, "any")


def show(run_cli: Run, cluster: SimCluster) -> dict[str, dict[str, object]]:
    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "share", "show", "-o", "json")
    assert result.exit_code == 0, result.stderr
    SCHEMA.validate(result.json)
    return {n["node"]: n for n in result.json["nodes"]}


@pytest.mark.kubectl
def test_a_hand_edit_that_never_reloaded_is_shown_and_then_applied(
    run_cli: Run, cluster: SimCluster, tmp_path: Path
) -> None:
    kubectl = kubectl_for(cluster, tmp_path)
    patch = json.dumps({"data": {"any": ts(3)}})
    edited = kubectl("patch", "configmap", CONFIGMAP, "-n", NAMESPACE, "--type=merge", "-p", patch)
    assert edited.returncode == 0, edited.stderr
    cluster.settle()
    assert cluster.allocatable("gpu-a") == 2  # not noticed (docs/upstream-facts.md P3.3)
    rows = show(run_cli, cluster)
    assert rows["gpu-a"]["replicas"] == 3 and rows["gpu-a"]["capacity"] == 2
    assert any("≠ 2 physical × 3 replicas" in str(p) for p in rows["gpu-a"]["problems"])  # type: ignore[attr-defined]

    result = run_cli(
        "--kubeconfig", str(cluster.kubeconfig), "share", "--replicas", "3", "--wait", "-o", "json"
    )
    assert result.exit_code == 0, result.stderr
    assert result.json["changes"]["keys"] == []  # nothing to write, only restarts
    assert {r["node"]: (r["after"], r["result"]) for r in result.json["nodes"]} == {
        "gpu-a": (6, "verified"),
        "gpu-b": (6, "verified"),
    }
    assert all(not r["problems"] for r in show(run_cli, cluster).values())


@pytest.mark.kubectl
def test_a_label_naming_a_missing_key_is_explained_and_repaired(
    run_cli: Run, cluster: SimCluster, tmp_path: Path
) -> None:
    kubectl = kubectl_for(cluster, tmp_path)
    labelled = kubectl("label", "node", "gpu-b", "nvidia.com/device-plugin.config=typo")
    assert labelled.returncode == 0, labelled.stderr
    cluster.settle()
    rows = show(run_cli, cluster)
    assert rows["gpu-b"]["selectedBy"] == "label" and rows["gpu-b"]["key"] == "typo"
    problems = " ".join(rows["gpu-b"]["problems"])  # type: ignore[arg-type]
    assert 'config-manager fails with "specified config typo does not exist"' in problems
    assert rows["gpu-a"]["problems"] == []

    table = run_cli("--kubeconfig", str(cluster.kubeconfig), "share", "show")
    assert "  problem: config-manager fails" in table.stdout

    fixed = run_cli(
        "--kubeconfig",
        str(cluster.kubeconfig),
        "share",
        "--replicas",
        "2",
        "--node",
        "gpu-b",
        "--wait",
    )
    assert fixed.exit_code == 0, fixed.stderr
    assert show(run_cli, cluster)["gpu-b"]["key"] == "kubectl-gpu-ts-2"
    assert cluster.allocatable("gpu-b") == 4


def test_show_can_be_narrowed_to_nodes(run_cli: Run, cluster: SimCluster) -> None:
    result = run_cli(
        "--kubeconfig", str(cluster.kubeconfig), "share", "show", "--node", "gpu-b", "-o", "json"
    )
    assert [n["node"] for n in result.json["nodes"]] == ["gpu-b"]


def test_a_cluster_wide_change_that_reaches_no_node_says_so_and_why(
    run_cli: Run, cluster: SimCluster
) -> None:
    gpu = ("--kubeconfig", str(cluster.kubeconfig))
    for node in ("gpu-a", "gpu-b"):  # each node pinned to a key of its own
        assert run_cli(*gpu, "share", "--replicas", "2", "--node", node).exit_code == 0

    result = run_cli(*gpu, "share", "--replicas", "4", "--wait")

    assert result.exit_code == 0, result.stderr
    assert "No resources found." not in result.stdout + result.stderr
    assert "node gpu-a reads key" in result.stderr and "node gpu-b reads key" in result.stderr
    assert "no node changed: no GPU node reads the key written now" in result.stderr
