"""`kubectl gpu install --dry-run`: offline manifests for review or GitOps, server checks, and
flags refused before anything is sent."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster, kubectl_for

Run = Callable[..., CliResult]
pytestmark = pytest.mark.timeout(120)  # clusters on the real control plane


def test_client_dry_run_prints_the_manifests_without_a_cluster(
    run_cli: Run, tmp_path: Path
) -> None:
    nowhere = tmp_path / "missing-kubeconfig"
    result = run_cli(
        "--kubeconfig", str(nowhere), "install", "--dry-run=client", "-o", "yaml",
        "-n", "gpu-tools", "--device-plugin-version", "v0.19.3",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    doc = yaml.safe_load(result.stdout)
    assert doc["kind"] == "List"
    kinds = [(o["kind"], o["metadata"]["name"]) for o in doc["items"]]
    assert kinds[0] == ("Namespace", "gpu-tools")
    assert ("DaemonSet", "kubectl-gpu-device-plugin") in kinds
    plugin = next(o for o in doc["items"] if o["metadata"]["name"] == "kubectl-gpu-device-plugin"
                  and o["kind"] == "DaemonSet")  # fmt: skip
    images = {c["image"] for c in plugin["spec"]["template"]["spec"]["containers"]}
    assert images == {"nvcr.io/nvidia/k8s-device-plugin:v0.19.3"}
    namespaced = [o for o in doc["items"] if "namespace" in o["metadata"]]
    assert {o["metadata"]["namespace"] for o in namespaced} == {"gpu-tools"}


def test_printed_manifests_applied_by_kubectl_are_what_install_would_apply(
    run_cli: Run, sim_cluster: MakeSimCluster, tmp_path: Path
) -> None:
    cluster: SimCluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)])
    kubectl = kubectl_for(cluster, tmp_path)
    printed = run_cli("install", "--dry-run=client", "-o", "yaml").stdout
    (tmp_path / "bundle.yaml").write_text(printed)
    applied = kubectl("create", "-f", str(tmp_path / "bundle.yaml"))
    assert applied.returncode == 0, applied.stderr
    cluster.settle(10)

    again = run_cli("--kubeconfig", str(cluster.kubeconfig), "install", "-o", "json")

    assert {o["action"] for o in again.json["items"]} == {"unchanged"}


def test_server_dry_run_keeps_nothing(run_cli: Run, sim_cluster: MakeSimCluster) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)])
    roles = cluster.client.list("clusterroles")  # a real server has its bootstrap roles
    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "install", "--dry-run=server")
    assert result.exit_code == 0, result.stderr
    assert "daemonset/kubectl-gpu-agent -n kubectl-gpu created (server dry run)" in result.stdout
    assert cluster.client.list("daemonsets") == []
    assert cluster.client.list("clusterroles") == roles


def test_an_unknown_device_plugin_version_is_refused_with_the_known_ones(run_cli: Run) -> None:
    result = run_cli("install", "--dry-run=client", "-o", "yaml", "--device-plugin-version", "v9")
    assert result.exit_code == 2
    assert "v9" in result.stderr and "v0.20.0" in result.stderr
    assert result.stdout == ""


def test_a_namespace_that_would_break_the_yaml_is_refused(run_cli: Run) -> None:
    result = run_cli("install", "--dry-run=client", "-o", "yaml", "-n", "x: {y}")
    assert result.exit_code == 2
    assert "not a valid namespace name" in result.stderr
