"""`kubectl gpu map -A` over claims on DRA nodes served by NVIDIA's own DRA kubelet plugin v0.4.1
(resource.k8s.io/v1, with its TimeSlicingSettings and DynamicMIG gates on, as the chart's
`featureGates` would set them): Kubernetes' scheduler allocates from the slices NVIDIA's plugin
publishes, the node's kubelet stand-in has the plugin prepare each claim before KWOK runs the
pod, and the map shows each allocation on its physical GPU: a time-sliced whole GPU with the
sharing config in effect, and a MIG device chosen as a firstAvailable alternative, drawn from
its GPU's counters (a claim made for an `nvidia.com/gpu` limit, KEP-5004, on NVIDIA's slices:
tests/cli/test_map_and_doctor_read_dra_allocations_by_the_real_scheduler.py). The real kubectl
reads the same slices and claims.

The served-version shapes (v1beta2, v1beta1), which v0.4.1 does not write, and consumable
capacity, which it does not publish, are in tests/cli/test_map_dra_across_planes_and_versions.py
on the project's stand-in slices."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult, eventually
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster, kubectl_for
from tests.kit.node import sandbox

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(sandbox.unavailable() is not None, reason=str(sandbox.unavailable())),
]
Run = Callable[..., CliResult]
Obj = dict[str, Any]
NS = "ml"
TIME_SLICING = {
    "apiVersion": "resource.nvidia.com/v1beta1",
    "kind": "GpuConfig",
    "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}},
}
ONE_G = "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"
NO_SUCH_GPU = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'"


def claim(name: str, request: Obj, config: list[Obj] | None = None) -> Obj:
    devices: Obj = {"requests": [request]}
    if config:
        devices["config"] = config
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS}, "spec": {"devices": devices},
    }  # fmt: skip


def claim_pod(name: str, node: str, claim_name: str) -> Obj:
    """A pod for the scheduler to place on `node`, using `claim_name`; no status of its own
    (KWOK writes it, once the node's kubelet stand-in had the claim prepared)."""
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
                 "containers": [{"name": "main", "image": "cuda:12",
                                 "resources": {"claims": [{"name": "gpu"}]}}]},
    }  # fmt: skip


def build(cluster: SimCluster) -> None:
    client = cluster.client
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    config = [{"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com",
                                               "parameters": TIME_SLICING}}]  # fmt: skip
    whole = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
    client.create(claim("train", whole, config))
    client.create(claim_pod("train", "dra-1", "train"))
    alternatives = [
        {"name": "whole", "deviceClassName": "gpu.nvidia.com",
         "selectors": [{"cel": {"expression": NO_SUCH_GPU}}]},
        {"name": "slice", "deviceClassName": "mig.nvidia.com",
         "selectors": [{"cel": {"expression": ONE_G}}]},
    ]  # fmt: skip
    client.create(claim("infer", {"name": "gpu", "firstAvailable": alternatives}))
    client.create(claim_pod("infer", "dra-2", "infer"))


def running(cluster: SimCluster, *pods: str) -> bool:
    phases = {(cluster.client.get("pods", p, NS).get("status") or {}).get("phase") for p in pods}
    return phases == {"Running"}


def slice_uuids(cluster: SimCluster) -> dict[tuple[str, str], str]:
    """(node, device) → the GPU UUID NVIDIA's slice gives it (a MIG device: its parent's)."""
    found = {}
    for piece in cluster.client.list("resourceslices"):
        for device in piece["spec"].get("devices") or []:
            attributes = device["attributes"]
            uuid = attributes.get("uuid") or attributes.get("parentUUID") or {}
            found[(piece["spec"]["nodeName"], device["name"])] = uuid.get("string", "")
    return found


def allocated(cluster: SimCluster, name: str) -> Obj:
    [result] = cluster.client.get("resourceclaims", name, NS)["status"]["allocation"]["devices"][
        "results"
    ]
    return dict(result)


def test_claims_nvidias_plugin_prepared_are_mapped_to_their_gpus(
    sim_cluster: MakeSimCluster, run_cli: Run, tmp_path: Path
) -> None:
    cluster = sim_cluster(
        [NodeSpec("dra-1", "A100-SXM4-80GB", 2, dra=True),
         NodeSpec("dra-2", "H100-SXM5-80GB", 1, dra=True)],
        dra_feature_gates=["DynamicMIG=true", "TimeSlicingSettings=true"],
    )  # fmt: skip
    build(cluster)
    assert cluster.dra_kubelet is not None
    assert eventually(lambda: running(cluster, "train", "infer"), 90), cluster.dra_kubelet.errors
    for pod in ("train", "infer"):  # NVIDIA's plugin prepared what the scheduler allocated
        uid = cluster.client.get("pods", pod, NS)["metadata"]["uid"]
        [prepared] = cluster.dra_kubelet.claims_of(uid)
        assert [d.device for d in prepared.devices] == [allocated(cluster, pod)["device"]]
    kubeconfig = str(cluster.kubeconfig)
    uuids = slice_uuids(cluster)

    result = run_cli("--kubeconfig", kubeconfig, "map", "-A", "-o", "json")

    assert result.exit_code == 0, result.stderr
    rows = {r["pod"]: r for r in result.json["items"]}
    train = rows["train"]
    assert (train["plane"], train["node"], train["container"]) == ("dra", "dra-1", "main")
    assert train["gpu_uuid"] == uuids[("dra-1", allocated(cluster, "train")["device"])]
    assert train["sharing"] == "TimeSlicing (Long)"  # and NVIDIA's plugin prepared it so
    infer = rows["infer"]
    [h100] = cluster.node_gpus("dra-2")
    assert (infer["node"], infer["gpu_uuid"], infer["mig_profile"]) == (
        "dra-2",
        h100.uuid,
        "1g.10gb",
    )
    assert infer["resource"] == "claim:infer/gpu/slice"  # the alternative the scheduler chose
    # NVIDIA's counter set for the H100: a 1g.10gb takes 9984Mi of 81152Mi and 16 of 132 SMs
    counters = infer["counters"].split(", ")
    assert {"memory 9984Mi/81152Mi", "multiprocessors 16/132"} <= set(counters), counters

    wide = run_cli("--kubeconfig", kubeconfig, "map", "-A", "-o", "wide")
    lines = wide.stdout.splitlines()
    assert lines[0].split()[:2] == ["NODE", "PLANE"] and "SHARING" in lines[0]
    assert {line.split()[0]: line.split()[1] for line in lines[1:]} == {
        "dra-1": "dra",
        "dra-2": "dra",
    }
    assert "TimeSlicing (Long)" in wide.stdout

    kubectl = kubectl_for(cluster, tmp_path)
    slices = json.loads(kubectl("get", "resourceslices", "-o", "json").stdout)["items"]
    assert {s["apiVersion"] for s in slices} == {"resource.k8s.io/v1"}
    assert {s["spec"]["nodeName"] for s in slices} == {"dra-1", "dra-2"}
    claims = json.loads(kubectl("get", "resourceclaims", "-n", NS, "-o", "json").stdout)["items"]
    assert {c["metadata"]["name"] for c in claims} == {"train", "infer"}
