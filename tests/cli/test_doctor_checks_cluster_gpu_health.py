"""`kubectl gpu doctor` without a pod: unhealthy GPUs, silent nodes, broken MIG, loose pods."""

from __future__ import annotations

import json
from collections.abc import Callable

import jsonschema

from tests.cli.doctorpods import by_layer, gpu_pod, run_pods
from tests.conftest import ROOT, CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

Run = Callable[..., CliResult]
SCHEMA = json.loads((ROOT / "schemas" / "doctor-result.v1.json").read_text())
BAD_FLAG = "version: v1\nflags:\n  plugin:\n    deviceIDStrategy: serial\n"


def doctor(run_cli: Run, cluster: SimCluster, *args: str) -> CliResult:
    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "doctor", "-o", "json", *args)
    jsonschema.validate(result.json, SCHEMA)
    return result


def test_allocatable_below_capacity_names_unhealthy_gpus(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    # No device plugin runs (no controllers): the node status is what the kubelet publishes
    # once a plugin reports one of eight GPUs unhealthy, written by the test.
    cluster = sim_cluster([NodeSpec("gpu-a", "H100-SXM5-80GB", 8, gpu_taint=True)], controllers=())
    status = {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "7"}}
    cluster.client.patch("nodes", "gpu-a", {"status": status}, status=True)
    result = doctor(run_cli, cluster)
    assert result.exit_code == 1
    [driver] = by_layer(result.json, "driver")
    assert driver["object"] == "node/gpu-a"
    assert driver["message"].startswith("1 of 8 nvidia.com/gpu on node gpu-a are unhealthy")
    assert driver["evidence"] == ["capacity nvidia.com/gpu=8, allocatable nvidia.com/gpu=7"]
    assert "Xid" in driver["fix"]


def test_a_crash_looping_plugin_is_found_without_a_pod(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    controllers = ("kubelet", "device-plugin")
    cluster = sim_cluster(
        [NodeSpec("gpu-a", "L4", 1, gpu_taint=True)],
        "helm",
        {"any": BAD_FLAG},
        "any",
        controllers=controllers,
    )
    result = doctor(run_cli, cluster)
    assert result.exit_code == 1
    messages = [d["message"] for d in by_layer(result.json, "kubelet")]
    assert "GPU node gpu-a advertises no GPUs" in messages
    [crash] = [d for d in by_layer(result.json, "kubelet") if "CrashLoopBackOff" in d["message"]]
    # validation's one wording of a rejected config: where (key, line, path), then what
    message = crash["message"]
    assert message.startswith(
        "the device plugin on node gpu-a is CrashLoopBackOff: key any is not a valid config: "
    )
    assert ":any line " in message
    assert message.endswith(": invalid --device-id-strategy option: serial")
    assert crash["evidence"][0].startswith("plugin pod nvdp-")
    assert by_layer(result.json, "driver") == []  # a config error, not a sick GPU


def test_mig_single_with_two_profiles_is_an_invalid_layout(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    node = NodeSpec(
        "gpu-a", "A100-SXM4-80GB", 2, gpu_taint=True, mig={0: ["3g.40gb"], 1: ["2g.20gb"]}
    )
    cluster = sim_cluster([node], "gpu-operator")
    result = doctor(run_cli, cluster)
    invalid = [d for d in by_layer(result.json, "kubelet") if "invalid layout" in d["message"]]
    assert [d["object"] for d in invalid] == ["node/gpu-a"]
    assert invalid[0]["evidence"] == ["nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB-MIG-INVALID"]


def test_untainted_gpu_nodes_and_pods_choosing_no_product_are_warnings(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    nodes = [NodeSpec("l4-a", "L4", 1), NodeSpec("h100-a", "H100-SXM5-80GB", 1, gpu_taint=True)]
    cluster = sim_cluster(nodes, "gpu-operator")
    run_pods(cluster, gpu_pod("anywhere", tolerate=True))
    result = doctor(run_cli, cluster)
    assert result.exit_code == 0  # warnings only
    warnings = by_layer(result.json, "scheduler", "warning")
    assert [d["object"] for d in warnings] == ["node/l4-a", "pods"]
    assert "kubectl taint node l4-a nvidia.com/gpu=present:NoSchedule" in warnings[0]["fix"]
    assert warnings[1]["evidence"] == ["pod default/anywhere: {'nvidia.com/gpu': 1}"]
    assert result.json["summary"] == {"errors": 0, "warnings": 2}


def test_a_healthy_cluster_exits_zero(run_cli: Run, sim_cluster: MakeSimCluster) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 2, gpu_taint=True)], "gpu-operator")
    result = doctor(run_cli, cluster)
    assert result.exit_code == 0
    assert result.json["diagnoses"] == [] and result.json["healthy"] is True
    table = run_cli("--kubeconfig", str(cluster.kubeconfig), "doctor")
    assert table.exit_code == 0 and "No GPU problems found." in table.stderr
