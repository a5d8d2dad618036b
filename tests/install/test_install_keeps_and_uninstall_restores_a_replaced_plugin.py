"""`install --mode bundle --replace-plugin` keeps the device plugin DaemonSet it deletes (its
manifest, in a ConfigMap of our namespace), and `uninstall` creates it again: the cluster has
the plugin it had before; one that cannot be created again is saved and the command named."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from kubectl_gpu.workflows.install import replaced
from tests.install.test_install_never_adds_a_second_device_plugin import (
    HELM_DS,
    NODES,
    STATIC_DS,
    Run,
    gpu,
    plugin_daemonsets,
)
from tests.kit.cluster.fixture import MakeSimCluster

pytestmark = pytest.mark.timeout(120)  # clusters on the real control plane


@pytest.mark.parametrize(("layout", "where"), [("helm", HELM_DS), ("static", STATIC_DS)])
def test_uninstall_restores_the_plugin_replace_plugin_deleted(
    run_cli: Run,
    sim_cluster: MakeSimCluster,
    layout: str,
    where: tuple[str, str],
) -> None:
    cluster = sim_cluster(NODES, layout)
    before = cluster.client.get("daemonsets", where[1], where[0])

    installed = gpu(run_cli, cluster, "install", "--mode", "bundle", "--replace-plugin")

    assert installed.exit_code == 0, installed.stderr
    assert f"configmap/{replaced.REPLACED_CONFIGMAP} -n kubectl-gpu kept" in installed.stdout
    kept = cluster.client.get("configmaps", replaced.REPLACED_CONFIGMAP, "kubectl-gpu")
    assert json.loads(kept["data"][f"{where[0]}.{where[1]}"])["spec"] == before["spec"]

    removed = gpu(run_cli, cluster, "uninstall")

    assert removed.exit_code == 0, removed.stderr
    assert f"daemonset/{where[1]} -n {where[0]} restored" in removed.stdout
    cluster.settle(10)
    assert plugin_daemonsets(cluster) == [where]
    again = cluster.client.get("daemonsets", where[1], where[0])
    assert again["spec"]["template"] == before["spec"]["template"]
    assert cluster.capacity("gpu-a") == 1


def test_a_plugin_that_cannot_be_restored_is_saved_and_the_command_named(
    run_cli: Run,
    sim_cluster: MakeSimCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    cluster = sim_cluster(NODES, "static")
    assert gpu(run_cli, cluster, "install", "--mode", "bundle", "--replace-plugin").exit_code == 0
    cluster.deny("create", "daemonsets", "apps")

    removed = gpu(run_cli, cluster, "uninstall")

    assert removed.exit_code == 1
    assert "could not restore the device plugin" in removed.stderr
    saved = removed.stderr.split("kubectl create -f ")[1].split()[0].rstrip(";")
    manifest = json.loads(Path(saved).read_text())
    assert manifest["metadata"]["name"] == STATIC_DS[1]
