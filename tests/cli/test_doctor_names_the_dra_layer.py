"""`kubectl gpu doctor POD` on a pod whose ResourceClaim waits for an allocation: the DRA
layer names the selector attribute no published device satisfies; a pod without claims never
reads DRA objects.

On the real control plane (resource.k8s.io/v1): NVIDIA's own DRA kubelet plugin v0.4.1 on dra-1
publishes the node's slice (the chart's classes beside it), the real scheduler finds no device
for the claim and leaves the pod pending, and which requests doctor sent is read from the real
server's audit log. At v1beta1: a real server of the pinned release told to serve
resource.k8s.io at v1beta1 only, as 1.32 did (tests/kit/plane/drareleases.py; no scheduler
runs there, and none is needed for a claim left pending), with the project's stand-in slices in
that version's shape (NVIDIA's v0.4.1 writes v1 only)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest

from tests.cli import clirequests
from tests.cli.doctorpods import by_layer
from tests.conftest import ROOT, CliResult
from tests.kit.cluster import NodeSpec, SimCluster, drastandin
from tests.kit.cluster.drastandin import DraGpu
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import objects
from tests.kit.kube.client import ByName
from tests.kit.node import sandbox
from tests.kit.plane.drareleases import serving

Run = Callable[..., CliResult]
SCHEMA = json.loads((ROOT / "schemas" / "doctor-result.v1.json").read_text())
H100 = "NVIDIA H100 80GB HBM3"
GPUS = {"dra-1": [DraGpu(0, "GPU-a0"), DraGpu(1, "GPU-a1")]}
Obj = dict[str, Any]


def pending_claim(client: ByName, version: str) -> None:
    """Pod ml/train whose claim wants an H100 (namespace ml made already)."""
    wanted = {
        "deviceClassName": "gpu.nvidia.com",
        "selectors": [
            {"cel": {"expression": f"device.attributes['gpu.nvidia.com'].productName == '{H100}'"}}
        ],
    }
    request = (
        {"name": "gpu", **wanted} if version == "v1beta1" else {"name": "gpu", "exactly": wanted}
    )
    client.create({
        "apiVersion": f"resource.k8s.io/{version}", "kind": "ResourceClaim",
        "metadata": {"name": "h100", "namespace": "ml"},
        "spec": {"devices": {"requests": [request]}},
    })  # fmt: skip
    client.create({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "h100"}],
                 "containers": [{"name": "main", "image": "cuda:12",
                                 "resources": {"claims": [{"name": "gpu"}]}}]},
    })  # fmt: skip


@pytest.fixture
def dra(sim_cluster: MakeSimCluster) -> SimCluster:
    """A real cluster with the DRA node dra-1 (two A100s; nothing else), served by NVIDIA's
    DRA kubelet plugin."""
    if sandbox.unavailable() is not None:
        pytest.skip(str(sandbox.unavailable()))
    return sim_cluster([NodeSpec("dra-1", "A100-SXM4-80GB", 2, dra=True)])


def doctor(run_cli: Run, cluster: SimCluster, *args: str) -> tuple[CliResult, list[str]]:
    """doctor's result, and the requests it sent."""
    start = clirequests.mark(cluster)
    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "doctor", *args)
    return result, clirequests.since(cluster, start)


def test_a_pending_claim_names_the_attribute_no_device_satisfies(
    run_cli: Run, dra: SimCluster
) -> None:
    dra.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    pending_claim(dra.client, "v1")
    dra.settle()  # the scheduler has found no device and left the pod pending

    result, requests = doctor(run_cli, dra, "train", "-n", "ml", "-o", "json")

    assert result.exit_code == 1, result.stderr
    jsonschema.validate(result.json, SCHEMA)
    [found] = by_layer(result.json, "dra")
    assert found["object"] == "resourceclaim/h100"
    assert "(productName)" in found["message"]
    assert found["evidence"] == [
        "gpu.nvidia.com/productName on the 2 published device(s): 'NVIDIA A100-SXM4-80GB'"
    ]
    assert "get /apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/h100" in requests
    table, _ = doctor(run_cli, dra, "train", "-n", "ml")
    assert table.exit_code == 1
    assert "dra" in table.stdout and "productName" in table.stdout


def test_at_v1beta1_the_claim_is_read_at_v1beta1(run_cli: Run) -> None:
    with serving("v1beta1") as served:
        drastandin.install(served.plane.client, GPUS, "v1beta1")
        served.namespace("ml")
        pending_claim(served.plane.client, "v1beta1")
        mark = served.mark()

        kubeconfig = str(served.plane.kubeconfig)
        result = run_cli("--kubeconfig", kubeconfig, "doctor", "train", "-n", "ml", "-o", "json")

        assert result.exit_code == 1, result.stderr
        [found] = by_layer(result.json, "dra")
        assert "(productName)" in found["message"]
        reads = served.paths_since(mark)
    assert "/apis/resource.k8s.io/v1beta1/namespaces/ml/resourceclaims/h100" in reads


def test_a_pod_without_claims_reads_no_dra_objects(run_cli: Run, dra: SimCluster) -> None:
    web = objects.pod("web", "default")
    web["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "dra-1"}
    dra.client.create(web)
    dra.settle()

    result, requests = doctor(run_cli, dra, "web")

    assert result.exit_code == 0, result.stderr
    assert requests and not [r for r in requests if "resource.k8s.io" in r]


def test_a_bound_gpu_pod_without_claims_reads_no_dra_objects(run_cli: Run, dra: SimCluster) -> None:
    dra.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    pending_claim(dra.client, "v1")
    dra.client.create(objects.pod("cuda", "ml", node_name="dra-1", gpus=1))
    dra.settle()

    result, requests = doctor(run_cli, dra, "cuda", "-n", "ml")

    assert requests and not [r for r in requests if "resource.k8s.io" in r]
