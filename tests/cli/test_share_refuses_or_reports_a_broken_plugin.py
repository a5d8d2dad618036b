"""Configs that would crash the plugin are refused before writing; a crash we could not
foresee is reported with the way back."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

Run = Callable[..., CliResult]
pytestmark = pytest.mark.timeout(120)  # clusters on the real control plane
NAMESPACE, CONFIGMAP = "nvidia-device-plugin", "nvdp-nvidia-device-plugin-configs"


def snapshot(cluster: SimCluster) -> tuple[str, str | None]:
    cm = cluster.client.get("configmaps", CONFIGMAP, NAMESPACE)
    pod = cluster.plugin_pod("gpu-a")
    return cm["metadata"]["resourceVersion"], pod["metadata"]["uid"] if pod else None


def test_a_config_the_plugin_would_reject_is_not_written(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    # An existing key with a flag the plugin rejects: editing its replicas keeps the bad flag.
    bad = "version: v1\nflags:\n  plugin:\n    deviceIDStrategy: serial\n"
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)], "helm", {"any": bad}, "any")
    before = snapshot(cluster)
    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "share", "--replicas", "2", "--wait")
    assert result.exit_code == 1
    assert "would stop the device plugin from starting; nothing was written" in result.stderr
    assert f"{NAMESPACE}/{CONFIGMAP}:any:4:" in result.stderr  # the finding, with its line
    assert "deviceIDStrategy" in result.stderr
    cluster.settle()
    assert snapshot(cluster) == before  # neither the ConfigMap nor the plugin pod changed


def test_mps_with_mixed_mig_strategy_is_not_written(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    mixed = "version: v1\nflags:\n  migStrategy: mixed\n"
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)], "helm", {"any": mixed}, "any")
    before = snapshot(cluster)
    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "share", "--replicas", "2", "--mps")
    assert result.exit_code == 1
    assert "using --mig-strategy=mixed is not supported with MPS" in result.stderr
    assert snapshot(cluster) == before


@pytest.fixture
def mig_cluster(sim_cluster: MakeSimCluster) -> SimCluster:
    # MIG on every GPU under migStrategy single, and no GFD: no label says MIG is on, so the planner
    # cannot know that MPS will fail ("not supported for MIG devices", docs/upstream-facts.md P1.7).
    node = NodeSpec("gpu-a", "A100-SXM4-80GB", 2, mig={0: ["3g.40gb"], 1: ["3g.40gb"]})
    single = "version: v1\nflags:\n  migStrategy: single\n"
    controllers = ("kubelet", "device-plugin")
    # The node side starts the plugin's pods, as a kubelet would: KWOK would show a new pod
    # Ready at once, and the crash only once the node side caught up, which a loaded machine
    # can delay past share's steady look (it then saw the pod Ready and timed out waiting for
    # capacity).
    return sim_cluster(
        [node], "helm", {"any": single}, "any", controllers=controllers, node_starts_programs=True
    )


def test_a_crash_looping_plugin_is_reported_with_the_rollback_hint(
    run_cli: Run, mig_cluster: SimCluster
) -> None:
    base = ("--kubeconfig", str(mig_cluster.kubeconfig), "share")
    assert mig_cluster.allocatable("gpu-a") == 2
    result = run_cli(*base, "--replicas", "2", "--mps", "--wait", "--timeout", "10s", "-o", "json")
    assert result.exit_code == 1
    [row] = result.json["nodes"]
    assert row["result"] == "failed" and "CrashLoopBackOff" in row["message"]
    assert result.json["succeeded"] is False
    assert "hint: restore the previous config with `kubectl gpu share rollback`" in result.stderr
    assert mig_cluster.allocatable("gpu-a") == 0  # the node lost its GPUs, as upstream does

    undo = run_cli(*base, "rollback", "--wait", "--timeout", "10s")
    assert undo.exit_code == 0, undo.stderr
    assert mig_cluster.allocatable("gpu-a") == 2


def test_restarts_stop_at_the_first_node_that_does_not_come_back(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    # Two nodes of one model: gpu-a proves the config for it, so gpu-b waits for its steady
    # check (a node of another model is that model's own proof and starts beside it:
    # tests/workflows/test_share_proves_a_config_on_one_node_per_gpu_model.py).
    nodes = [
        NodeSpec("gpu-a", "A100-SXM4-80GB", 1, mig={0: ["3g.40gb"]}),
        NodeSpec("gpu-b", "A100-SXM4-80GB", 1, mig={0: ["3g.40gb"]}),
    ]
    single = "version: v1\nflags:\n  migStrategy: single\n"
    controllers = ("kubelet", "device-plugin")
    # The node side starts the plugin's pods: under KWOK a plugin that crashes at start looks
    # Ready until the node side reports the crash, which a loaded machine can delay by more
    # than the seconds share wants a new plugin to stay Ready (restarts.STEADY_S; the brief
    # Ready a real kubelet shows is tests/workflows/test_share_workflow_on_a_static_api.py's).
    cluster = sim_cluster(
        nodes, "helm", {"any": single}, "any", controllers=controllers, node_starts_programs=True
    )
    before = cluster.plugin_pod("gpu-b")
    result = run_cli(
        "--kubeconfig",
        str(cluster.kubeconfig),
        "share",
        "--replicas",
        "2",
        "--mps",
        "--timeout",
        "10s",
        "-o",
        "json",
    )
    assert result.exit_code == 1
    rows = {r["node"]: r for r in result.json["nodes"]}
    assert rows["gpu-a"]["result"] == "failed"
    assert rows["gpu-b"]["result"] == "not-restarted"
    assert "stopped after gpu-a failed" in rows["gpu-b"]["message"]
    after = cluster.plugin_pod("gpu-b")
    assert before is not None and after is not None
    assert after["metadata"]["uid"] == before["metadata"]["uid"]  # untouched


def test_many_time_slicing_replicas_are_written_with_a_warning(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)], "helm", {"any": "version: v1\n"}, "any")
    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "share", "--replicas", "20", "--wait")
    assert result.exit_code == 0, result.stderr
    assert "warning: 20 time-slicing replicas per GPU" in result.stderr
    assert "[sharing.many-replicas]" in result.stderr
    assert cluster.allocatable("gpu-a") == 20
