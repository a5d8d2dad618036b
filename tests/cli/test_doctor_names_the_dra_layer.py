"""`kubectl gpu doctor POD` on a pod whose ResourceClaim waits for an allocation, against the
API stand-in with the simulated NVIDIA DRA driver's classes and slices: the DRA layer names the
selector attribute no published device satisfies, at whatever resource.k8s.io version the
server serves; a pod without claims never reads DRA objects."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.cli.doctorpods import by_layer
from tests.conftest import ROOT, CliResult
from tests.fakes.apiserver import samples
from tests.fakes.apiserver.server import FakeApiServer
from tests.fakes.cluster import dradriver
from tests.fakes.cluster.dradriver import DraGpu

Run = Callable[..., CliResult]
SCHEMA = json.loads((ROOT / "schemas" / "doctor-result.v1.json").read_text())
H100 = "NVIDIA H100 80GB HBM3"
Obj = dict[str, Any]


def pending_claim(server: FakeApiServer, version: str) -> None:
    server.store.registry.serve_versions("resource.k8s.io", [version])
    server.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    dradriver.install(server.store, {"dra-1": [DraGpu(0, "GPU-a0"), DraGpu(1, "GPU-a1")]}, version)
    wanted = {
        "deviceClassName": "gpu.nvidia.com",
        "selectors": [
            {"cel": {"expression": f"device.attributes['gpu.nvidia.com'].productName == '{H100}'"}}
        ],
    }
    request = (
        {"name": "gpu", **wanted} if version == "v1beta1" else {"name": "gpu", "exactly": wanted}
    )
    server.store.create({
        "apiVersion": f"resource.k8s.io/{version}", "kind": "ResourceClaim",
        "metadata": {"name": "h100", "namespace": "ml"},
        "spec": {"devices": {"requests": [request]}},
    })  # fmt: skip
    pod = samples.pod("train", "ml", phase="Pending")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "h100"}]
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    server.store.create(pod)


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_a_pending_claim_names_the_attribute_no_device_satisfies(
    run_cli: Run, fake_apiserver: FakeApiServer, kubeconfig: Path, version: str
) -> None:
    pending_claim(fake_apiserver, version)

    result = run_cli("--kubeconfig", str(kubeconfig), "doctor", "train", "-n", "ml", "-o", "json")

    assert result.exit_code == 1, result.stderr
    jsonschema.validate(result.json, SCHEMA)
    [found] = by_layer(result.json, "dra")
    assert found["object"] == "resourceclaim/h100"
    assert "(productName)" in found["message"]
    assert found["evidence"] == [
        "gpu.nvidia.com/productName on the 2 published device(s): 'NVIDIA A100-SXM4-80GB'"
    ]
    reads = {r.path for r in fake_apiserver.requests}
    assert f"/apis/resource.k8s.io/{version}/namespaces/ml/resourceclaims/h100" in reads


def test_the_table_shows_the_dra_layer(
    run_cli: Run, fake_apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    pending_claim(fake_apiserver, "v1")

    result = run_cli("--kubeconfig", str(kubeconfig), "doctor", "train", "-n", "ml")

    assert result.exit_code == 1
    assert "dra" in result.stdout and "productName" in result.stdout


def test_a_pod_without_claims_reads_no_dra_objects(
    run_cli: Run, fake_apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    fake_apiserver.store.create(samples.pod("web", "default"))

    result = run_cli("--kubeconfig", str(kubeconfig), "doctor", "web")

    assert result.exit_code == 0, result.stderr
    assert not [r for r in fake_apiserver.requests if "resource.k8s.io" in r.path]


def test_a_bound_gpu_pod_without_claims_reads_no_dra_objects(
    run_cli: Run, fake_apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    pending_claim(fake_apiserver, "v1")
    fake_apiserver.store.create(samples.pod("cuda", "ml", node_name="dra-1", gpus=1))
    fake_apiserver.requests.clear()

    run_cli("--kubeconfig", str(kubeconfig), "doctor", "cuda", "-n", "ml")

    assert not [r for r in fake_apiserver.requests if "resource.k8s.io" in r.path]
