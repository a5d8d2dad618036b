"""The one-GPU scenario (docs/upstream-facts.md P2.1): capacity 1 → 3, three pods, one GPU.

A fresh GPU Operator install (no sharing config), one node with one GPU. `kubectl gpu share
--replicas 3 --wait` writes the fixture's config, points the ClusterPolicy at it, and proves
capacity 3; three pods asking for one `nvidia.com/gpu` each get a distinct replica of the same
GPU; `kubectl gpu share show` explains why.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conftest import DATA, CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster, kubectl_for

Run = Callable[..., CliResult]
pytestmark = pytest.mark.timeout(120)  # clusters on the real control plane
FIXTURE = DATA / "device-plugin" / "time-slicing-3.yaml"  # time-slicing, 3 replicas


def cuda_pod(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "cuda",
                    "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
        },
    }


@pytest.fixture
def cluster(sim_cluster: MakeSimCluster) -> SimCluster:
    return sim_cluster([NodeSpec("minikube", "L4", 1)], "gpu-operator")


@pytest.mark.kubectl
def test_three_pods_share_the_one_gpu(run_cli: Run, cluster: SimCluster, tmp_path: Path) -> None:
    kubectl = kubectl_for(cluster, tmp_path)
    assert cluster.capacity("minikube") == 1
    result = run_cli(
        "--kubeconfig", str(cluster.kubeconfig), "share", "--replicas", "3", "--wait", "-o", "json"
    )
    assert result.exit_code == 0, result.stderr
    [row] = result.json["nodes"]
    assert (row["node"], row["gpus"], row["before"], row["after"], row["result"]) == (
        "minikube",
        1,
        1,
        3,
        "verified",
    )
    [change] = result.json["changes"]["keys"]
    assert yaml.safe_load(change["after"]) == yaml.safe_load(FIXTURE.read_text())
    assert result.json["changes"]["clusterPolicy"]["after"] == {
        "name": "device-plugin-config",
        "default": "default",
    }

    out = kubectl("get", "node", "minikube", "-o", "json")
    assert json.loads(out.stdout)["status"]["capacity"]["nvidia.com/gpu"] == "3"
    for i in range(3):
        applied = kubectl("apply", "-f", "-", stdin=json.dumps(cuda_pod(f"cuda-{i}")))
        assert applied.returncode == 0, applied.stderr
    cluster.settle()
    pods = json.loads(kubectl("get", "pods", "-n", "default", "-o", "json").stdout)["items"]
    assert sorted((p["metadata"]["name"], p["status"]["phase"]) for p in pods) == [
        ("cuda-0", "Running"),
        ("cuda-1", "Running"),
        ("cuda-2", "Running"),
    ]
    [gpu] = cluster.node_gpus("minikube")
    held = sorted(d for a in cluster.allocations("minikube") for d in a.device_ids)
    assert held == [f"{gpu.uuid}::0", f"{gpu.uuid}::1", f"{gpu.uuid}::2"]


def test_share_show_explains_the_one_gpu_node(run_cli: Run, cluster: SimCluster) -> None:
    base = ("--kubeconfig", str(cluster.kubeconfig), "share")
    assert run_cli(*base, "--replicas", "3", "--wait").exit_code == 0
    for i in range(3):
        cluster.client.create(cuda_pod(f"cuda-{i}"), keep_status=False)
    cluster.settle()
    shown = run_cli(*base, "show")
    assert shown.exit_code == 0, shown.stderr
    header, row, *explained = shown.stdout.splitlines()
    assert header.split()[:9] == [
        "NODE",
        "KEY",
        "STRATEGY",
        "REPLICAS",
        "GPUS",
        "CAPACITY",
        "ALLOCATABLE",
        "IN",
        "USE",
    ]
    assert row.split()[:8] == ["minikube", "default", "time-slicing", "3", "1", "3", "3", "3"]
    assert explained == [
        "minikube: key default (default): 1 physical device(s) × 3 time-slicing replicas = "
        "3 nvidia.com/gpu; advertises 3 (allocatable 3), 3 in use by pods"
    ]
    document = run_cli(*base, "show", "-o", "json").json
    assert document["kind"] == "ShareStatus"
    [node] = document["nodes"]
    assert (node["gpus"], node["replicas"], node["capacity"], node["inUse"], node["problems"]) == (
        1,
        3,
        3,
        3,
        [],
    )


def test_share_off_under_running_pods_warns_before_and_show_says_so_after(
    run_cli: Run, cluster: SimCluster
) -> None:
    gpu = ("--kubeconfig", str(cluster.kubeconfig))
    assert run_cli(*gpu, "share", "--replicas", "3", "--wait").exit_code == 0
    for i in range(3):
        cluster.client.create(cuda_pod(f"cuda-{i}"), keep_status=False)
    cluster.settle()

    refused = run_cli(*gpu, "share", "off", "--wait")  # pods would be hit: named, not done
    assert refused.exit_code == 1 and "  default/cuda-0: uses nvidia.com/gpu" in refused.stderr
    off = run_cli(*gpu, "share", "off", "--wait", "--force")
    shown = run_cli(*gpu, "share", "show", "-o", "json")

    assert off.exit_code == 0, off.stderr  # the change itself succeeded
    assert (
        "node minikube: running pods hold 3 nvidia.com/gpu, but it will advertise 1: they keep "
        "running until restarted, then 2 of them will not fit"
    ) in off.stderr
    [row] = shown.json["nodes"]
    assert row["inUse"] == 3 and row["capacity"] == 1
    assert any("running pods hold 3 nvidia.com/gpu but the node advertises 1" in p
               for p in row["problems"])  # fmt: skip
