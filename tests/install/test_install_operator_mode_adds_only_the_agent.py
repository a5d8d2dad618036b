"""`kubectl gpu install --mode operator` beside the GPU Operator: only the agent and its RBAC.

The operator already runs NVIDIA's device plugin (and its MIG manager); the bundle's own plugin
must not be added, and the agent may delete plugin pods only in the operator's namespace.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import ApiError

Run = Callable[..., CliResult]
pytestmark = pytest.mark.timeout(120)  # clusters on the real control plane


def test_operator_mode_installs_the_agent_beside_the_operators_plugin(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "A100-SXM4-40GB", 1)], "gpu-operator")
    base = ("--kubeconfig", str(cluster.kubeconfig))

    result = run_cli(*base, "install", "--mode", "operator")

    assert result.exit_code == 0, result.stderr
    assert "kubectl-gpu-device-plugin" not in result.stdout
    cluster.settle(10)
    try:
        cluster.client.get("daemonsets", "kubectl-gpu-device-plugin", "kubectl-gpu")
        raise AssertionError("operator mode must not install a second device plugin")
    except ApiError:
        pass
    role = cluster.client.get("roles", "kubectl-gpu-agent-plugin-restart", "gpu-operator")
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]}
    ]
    status = run_cli(*base, "status", "-o", "json")
    assert status.json["mode"] == "operator"
    agent = next(p for p in status.json["parts"] if p["name"] == "kubectl-gpu-agent"
                 and p["kind"] == "DaemonSet")  # fmt: skip
    assert agent["state"] == "ok", agent
    assert status.json["nodesWithoutReport"] == ["gpu-a"]  # no agent process runs here
    assert status.exit_code == 1


def test_status_before_install_beside_the_operator_says_operator_mode_not_missing_parts(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "A100-SXM4-40GB", 1)], "gpu-operator")
    base = ("--kubeconfig", str(cluster.kubeconfig))

    table = run_cli(*base, "status")
    document = run_cli(*base, "status", "-o", "json")

    assert table.exit_code == 1 and table.exception is None
    assert "error: kubectl-gpu is not installed in namespace kubectl-gpu" in table.stderr
    assert "installs it in operator mode here" in table.stderr
    assert "parts not ready" not in table.stderr
    assert document.json["mode"] == "operator"
    names = {part["name"] for part in document.json["parts"]}
    assert "kubectl-gpu-device-plugin" not in names  # not a part operator mode would add
