"""A pending GPU pod: doctor names each scheduler reason, node by node, with the fix.

On the real control plane: the real scheduler leaves the pod pending and writes its
FailedScheduling event; doctor's reasons must agree with it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.cli.doctorpods import H100, by_layer, gpu_pod, run_pods
from tests.conftest import ROOT, CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

Run = Callable[..., CliResult]
PRODUCT = "nvidia.com/gpu.product"
SCHEMA = json.loads((ROOT / "schemas" / "doctor-result.v1.json").read_text())


@pytest.fixture
def busy_h100s(sim_cluster: MakeSimCluster) -> SimCluster:
    """Two H100 nodes fully used by tolerating pods; one free A100 node with the GPU taint."""
    nodes = [
        NodeSpec("h100-a", "H100-SXM5-80GB", 2, gpu_taint=True),
        NodeSpec("h100-b", "H100-SXM5-80GB", 2, gpu_taint=True),
        NodeSpec("a100-a", "A100-SXM4-80GB", 2, gpu_taint=True),
    ]
    cluster = sim_cluster(nodes, "gpu-operator")
    fillers = [gpu_pod(f"fill-{i}", "2", selector={PRODUCT: H100}, tolerate=True) for i in range(2)]
    run_pods(cluster, *fillers)
    return cluster


def doctor(run_cli: Run, cluster: SimCluster, *args: str) -> CliResult:
    return run_cli("--kubeconfig", str(cluster.kubeconfig), "doctor", *args)


def test_worked_example_names_the_taint_and_the_product_with_free_products(
    run_cli: Run, busy_h100s: SimCluster
) -> None:
    run_pods(busy_h100s, gpu_pod("train", selector={PRODUCT: H100}))
    result = doctor(run_cli, busy_h100s, "train", "-o", "json")
    assert result.exit_code == 1, result.stderr
    jsonschema.validate(result.json, SCHEMA)
    [product] = by_layer(result.json, "scheduler")
    # the free A100's taint is no error: the pod's selector rules that node out anyway; the
    # H100s it selects carry the taint too, so it would stay pending when they free up
    [taint] = by_layer(result.json, "scheduler", "warning")
    assert taint["message"] == (
        "untolerated taint nvidia.com/gpu=present:NoSchedule on 2 node(s) with GPUs (none free "
        "now): h100-a, h100-b"
    )
    assert "operator: Exists" in taint["fix"]
    assert product["message"] == (
        f"no node with free GPUs matches the pod's node selector {PRODUCT}={H100}; "
        "free products: NVIDIA-A100-SXM4-80GB"
    )
    assert any("matching but full: node h100-a" in e for e in product["evidence"])
    assert any(
        e.startswith("FailedScheduling: 0/3 nodes are available") for e in product["evidence"]
    )
    assert {d["layer"] for d in result.json["diagnoses"]} == {"scheduler"}


def test_worked_example_as_a_table(run_cli: Run, busy_h100s: SimCluster) -> None:
    run_pods(busy_h100s, gpu_pod("train", selector={PRODUCT: H100}))
    result = doctor(run_cli, busy_h100s, "train")
    assert result.exit_code == 1
    header = result.stdout.splitlines()[0].split()
    assert header == ["LAYER", "SEVERITY", "OBJECT", "FINDING", "FIX"]
    assert "untolerated taint nvidia.com/gpu=present:NoSchedule" in result.stdout
    assert "1 error(s), 1 warning(s)" in result.stderr
    wide = doctor(run_cli, busy_h100s, "train", "-o", "wide")
    assert "EVIDENCE" in wide.stdout.splitlines()[0]


def test_a_tolerating_pod_only_misses_the_product(run_cli: Run, busy_h100s: SimCluster) -> None:
    run_pods(busy_h100s, gpu_pod("train", selector={PRODUCT: H100}, tolerate=True))
    result = doctor(run_cli, busy_h100s, "train", "-o", "json")
    [product] = by_layer(result.json, "scheduler")
    assert "free products: NVIDIA-A100-SXM4-80GB" in product["message"]


def test_too_few_free_gpus_anywhere_is_insufficient(run_cli: Run, busy_h100s: SimCluster) -> None:
    run_pods(busy_h100s, gpu_pod("big", "4", tolerate=True))
    result = doctor(run_cli, busy_h100s, "big", "-o", "json")
    [short] = by_layer(result.json, "scheduler")
    assert short["message"] == "no node has 4 nvidia.com/gpu at all (the largest has 2)"


def test_a_renamed_shared_resource_is_named(run_cli: Run, sim_cluster: MakeSimCluster) -> None:
    shared = (
        "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
        "    - name: nvidia.com/gpu\n      replicas: 4\n"
    )
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)], "helm", {"any": shared}, "any")
    assert cluster.allocatable("gpu-a", "nvidia.com/gpu.shared") == 4
    run_pods(cluster, gpu_pod("train"))
    result = doctor(run_cli, cluster, "train", "-o", "json")
    [renamed] = by_layer(result.json, "scheduler")
    assert "sharing renamed it to nvidia.com/gpu.shared on gpu-a" in renamed["message"]
    assert renamed["fix"].startswith("request nvidia.com/gpu.shared")


def test_a_mig_resource_on_a_single_strategy_node(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    node = NodeSpec("gpu-a", "A100-SXM4-80GB", 1, mig={0: ["3g.40gb", "3g.40gb"]})
    cluster = sim_cluster([node], "gpu-operator")  # the operator layout runs strategy single
    run_pods(cluster, gpu_pod("train", resource="nvidia.com/mig-3g.40gb"))
    result = doctor(run_cli, cluster, "train", "-o", "json")
    [mig] = by_layer(result.json, "scheduler")
    assert "MIG strategy single on gpu-a advertises MIG devices as nvidia.com/gpu" in mig["message"]
    assert "-MIG-3g.40gb" in mig["fix"]


def test_a_missing_pod_is_reported_as_not_found(run_cli: Run, busy_h100s: SimCluster) -> None:
    result = doctor(run_cli, busy_h100s, "nope", "-o", "json")
    assert result.exit_code == 1
    [missing] = by_layer(result.json, "admission")
    assert "pod default/nope not found" in missing["message"]


def test_a_pod_is_looked_up_in_the_kubeconfig_contexts_namespace(
    run_cli: Run, busy_h100s: SimCluster, tmp_path: Path
) -> None:
    # as kubectl does: -n, else the context's namespace, else default
    busy_h100s.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    in_ml = gpu_pod("train", selector={PRODUCT: H100})
    in_ml["metadata"]["namespace"] = "ml"
    run_pods(busy_h100s, in_ml)
    config = yaml.safe_load(busy_h100s.kubeconfig.read_text())
    for context in config["contexts"]:
        context["context"]["namespace"] = "ml"
    ml_context = tmp_path / "ml-kubeconfig"
    ml_context.write_text(yaml.safe_dump(config))

    found = run_cli("--kubeconfig", str(ml_context), "doctor", "train", "-o", "json")
    elsewhere = run_cli("--kubeconfig", str(ml_context), "doctor", "train", "-n", "default")

    assert found.exit_code == 1 and found.json["target"]["namespace"] == "ml", found.stderr
    assert by_layer(found.json, "scheduler")
    assert elsewhere.exit_code == 1 and "kubectl get pods -n default" in elsewhere.stdout
