"""`kubectl gpu doctor POD` on a cluster with device-plugin and DRA nodes (DRA serving
`nvidia.com/gpu` too, KEP-5004, on in 1.37): one finding per cause. A pod whose claim no
device satisfies is not also told that the scheduler finds no node; a `nvidia.com/gpu: 9` pod
with no claim gets the scheduler's finding only, with what DRA's devices offer as its
evidence; a Running pod holding a GPU through its claim is said to hold that GPU, as `map`
shows it; a krew user without cel-python is told to install it alone. On the real control
plane, where the real scheduler leaves the pods pending or places them."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

import kubectl_gpu
from tests.cli.doctorpods import by_layer
from tests.cli.test_doctor_names_the_dra_layer import doctor, pending_claim
from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import objects
from tests.kit.kube.client import KubeClient
from tests.kit.node import sandbox

Run = Callable[..., CliResult]
Obj = dict[str, Any]


@pytest.fixture
def planes(sim_cluster: MakeSimCluster) -> SimCluster:
    """Device-plugin node gpu-a (2 L4) and DRA node dra-1 (2 A100s, served by NVIDIA's DRA
    kubelet plugin), namespace ml."""
    if sandbox.unavailable() is not None:
        pytest.skip(str(sandbox.unavailable()))
    nodes = [NodeSpec("gpu-a", "L4", 2), NodeSpec("dra-1", "A100-SXM4-80GB", 2, dra=True)]
    cluster = sim_cluster(nodes, "helm", {"any": "version: v1\n"}, "any")
    cluster.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    return cluster


def claimed(client: KubeClient, name: str) -> None:
    """Pod ml/NAME using claim NAME for any GPU of gpu.nvidia.com."""
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
    client.create({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"devices": {"requests": [request]}},
    })  # fmt: skip
    client.create({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ml"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
                 "containers": [{"name": "main", "image": "cuda:12",
                                 "resources": {"claims": [{"name": "gpu"}]}}]},
    })  # fmt: skip


def test_an_unmet_claim_selector_is_the_one_finding(run_cli: Run, planes: SimCluster) -> None:
    pending_claim(planes.client, "v1")
    planes.settle()

    result, _ = doctor(run_cli, planes, "train", "-n", "ml", "-o", "json")

    assert result.exit_code == 1, result.stderr
    [found] = [d for d in result.json["diagnoses"] if d["severity"] == "error"]
    assert found["layer"] == "dra" and "(productName)" in found["message"]
    assert by_layer(result.json, "scheduler") == []
    assert by_layer(result.json, "scheduler", "warning") == []


def test_too_many_gpus_without_a_claim_is_one_finding_with_dra_as_evidence(
    run_cli: Run, planes: SimCluster
) -> None:
    nine = objects.pod("nine", "ml", gpus=9)
    del nine["status"]
    planes.client.create(nine)
    planes.settle()

    result, _ = doctor(run_cli, planes, "nine", "-n", "ml", "-o", "json")

    assert result.exit_code == 1, result.stderr
    [found] = [d for d in result.json["diagnoses"] if d["severity"] == "error"]
    assert found["layer"] == "scheduler"
    assert "no node has 9 nvidia.com/gpu" in found["message"]
    assert by_layer(result.json, "dra") == []
    assert any(e.startswith("through DRA: ") and "needs 9 device(s)" in e
               for e in found["evidence"])  # fmt: skip


def test_a_running_dra_pod_is_said_to_hold_its_gpu(run_cli: Run, planes: SimCluster) -> None:
    claimed(planes.client, "runs")
    planes.settle()
    mapped = run_cli("--kubeconfig", str(planes.kubeconfig), "map", "-A", "-o", "json")
    [row] = [r for r in mapped.json["items"] if r["pod"] == "runs"]

    result, _ = doctor(run_cli, planes, "runs", "-n", "ml", "-o", "json")

    assert result.exit_code == 0, result.stderr
    [healthy] = result.json["diagnoses"]
    uuid = row["gpu_uuid"]  # the GPU NVIDIA's DRA plugin published for the device
    assert uuid.startswith("GPU-")
    assert f"({uuid}) through claim runs" in healthy["message"]
    assert "no GPUs" not in healthy["message"]


def test_a_krew_user_without_cel_is_told_to_install_cel_python_alone(
    run_cli: Run, planes: SimCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    pending_claim(planes.client, "v1")
    planes.settle()
    monkeypatch.setitem(sys.modules, "celpy", None)  # cel-python not installed
    monkeypatch.delitem(sys.modules, "kubectl_gpu.cel", raising=False)
    monkeypatch.delattr(kubectl_gpu, "cel", raising=False)
    archive = "/home/u/.krew/store/gpu/v0.1.0/kubectl-gpu"  # what the archive's entry sets
    monkeypatch.setattr(sys.modules["__main__"], "KUBECTL_GPU_ARCHIVE", archive, raising=False)

    result, _ = doctor(run_cli, planes, "train", "-n", "ml", "-o", "json")

    [found] = by_layer(result.json, "dra", "warning")
    assert f"{sys.executable} -m pip install --user 'cel-python>=0.5,<1'" in found["fix"]
    assert "kubectl-gpu[dra]" not in found["fix"]
