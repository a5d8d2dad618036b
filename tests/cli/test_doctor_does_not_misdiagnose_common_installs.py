"""Cases `doctor` once got wrong: a MIG profile on nodes with MIG off, a healthy Helm install
without a sharing config, the static manifest (healthy on GPU nodes, crash-looping on CPU
nodes), and `share show` on both."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.cli.doctorpods import by_layer, gpu_pod, run_pods
from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

Run = Callable[..., CliResult]
pytestmark = pytest.mark.timeout(120)  # clusters on the real control plane


def run(run_cli: Run, cluster: SimCluster, *args: str) -> CliResult:
    return run_cli("--kubeconfig", str(cluster.kubeconfig), *args)


def test_a_mig_profile_on_nodes_with_mig_off_says_mig_is_disabled(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "A100-SXM4-80GB", 1, gpu_taint=True)], "gpu-operator")
    run_pods(cluster, gpu_pod("m", resource="nvidia.com/mig-1g.10gb", tolerate=True))
    result = run(run_cli, cluster, "doctor", "m", "-o", "json")
    [why] = by_layer(result.json, "scheduler")
    assert why["message"] == (
        "no node advertises nvidia.com/mig-1g.10gb: MIG is disabled on gpu-a "
        "(MIG-capable GPUs, not partitioned)"
    )
    assert "kubectl gpu mig apply" in why["fix"] and "--node gpu-a" in why["fix"]
    assert "-MIG-" not in why["fix"]  # no product label that no node carries


def test_under_strategy_single_the_fix_names_the_product_label_a_node_has(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    node = NodeSpec("gpu-a", "A100-SXM4-80GB", 1, gpu_taint=True, mig={0: ["1g.10gb"] * 7})
    cluster = sim_cluster([node], "gpu-operator")
    run_pods(cluster, gpu_pod("m", resource="nvidia.com/mig-1g.10gb", tolerate=True))
    [why] = by_layer(run(run_cli, cluster, "doctor", "m", "-o", "json").json, "scheduler")
    label = cluster.client.get("nodes", "gpu-a")["metadata"]["labels"]["nvidia.com/gpu.product"]
    assert why["fix"] == f"request nvidia.com/gpu with nodeSelector nvidia.com/gpu.product={label}"


def test_a_healthy_helm_install_without_a_sharing_config_is_healthy(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1, gpu_taint=True)], "helm")
    result = run(run_cli, cluster, "doctor")
    assert result.exit_code == 0, result.stdout
    assert "No GPU problems found." in result.stderr
    show = run(run_cli, cluster, "share", "show")
    assert show.exit_code == 0, show.stderr
    assert "config: none (the plugin's defaults)" in show.stderr
    assert "gpu-a: no key (plugin defaults): 1 physical device(s), not shared" in show.stdout


def test_the_static_manifest_is_shown_and_its_crash_on_a_cpu_node_found(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    nodes = [NodeSpec("gpu-a", "L4", 1, gpu_taint=True), NodeSpec("cpu-1")]
    cluster = sim_cluster(nodes, "static")
    result = run(run_cli, cluster, "doctor", "-o", "json")
    assert result.exit_code == 0  # the GPU node is fine; the CPU node's crash is a warning
    [crash] = by_layer(result.json, "kubelet", "warning")
    assert crash["object"].startswith("pod/nvidia-device-plugin-daemonset-")
    assert crash["message"] == (
        "the device plugin is CrashLoopBackOff on node cpu-1, which has no GPU"
    )
    assert "node affinity" in crash["fix"]
    show = run(run_cli, cluster, "share", "show", "-o", "json")
    assert show.exit_code == 0, show.stderr
    [row] = show.json["nodes"]
    assert (row["node"], row["pluginStatus"], row["problems"]) == ("gpu-a", "Running", [])


def test_share_still_refuses_to_write_a_config_the_plugin_cannot_read(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1, gpu_taint=True)], "static")
    result = run(run_cli, cluster, "share", "--replicas", "2")
    assert result.exit_code == 1
    assert "cannot take a sharing config" in result.stderr
