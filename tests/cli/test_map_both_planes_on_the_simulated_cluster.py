"""Both planes on the simulated cluster: a device-plugin node whose pod the real scheduler
places and the simulated kubelet and NVIDIA device plugin serve, reported by the real agent's
reporting pass (NVML and PodResources stand-ins), next to a DRA node served by NVIDIA's own DRA
kubelet plugin v0.4.1 (a whole GPU and a MIG device of a MIG-enabled GPU, in the ResourceSlice
the plugin publishes itself): the real scheduler allocates the claims, the node's kubelet
stand-in has NVIDIA's plugin prepare them and KWOK runs the pods. One `kubectl gpu map -A` shows
both, each on its physical GPU, and the real kubectl sees the same claims."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kubectl_gpu import cluster
from kubectl_gpu.agent import reporting
from tests.conftest import CliResult
from tests.gpumap import reportbuilders
from tests.kit.cluster import NodeSpec
from tests.kit.cluster.fixture import MakeSimCluster, kubectl_for
from tests.kit.node import libnvml, sandbox
from tests.kit.node.kubelet import FakeKubelet

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(sandbox.unavailable() is not None, reason=str(sandbox.unavailable())),
]
Run = Callable[..., CliResult]


def claim_pod(name: str, claim: str) -> dict[str, object]:
    """A pod for the scheduler to place on dra-1 with `claim` allocated."""
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ml"},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": "dra-1"},
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
                 "containers": [{"name": "main", "image": "cuda:12",
                                 "resources": {"claims": [{"name": "gpu"}]}}]},
    }  # fmt: skip


def test_map_shows_the_device_plugin_and_dra_nodes_side_by_side(
    sim_cluster: MakeSimCluster, fake_kubelet: FakeKubelet, run_cli: Run, tmp_path: Path
) -> None:
    dra = NodeSpec("dra-1", "A100-SXM4-80GB", 2, dra=True, mig={1: ("3g.40gb",)})
    sim = sim_cluster([NodeSpec("gpu-a", "L4", 1), dra], layout="helm")
    client = sim.client
    whole, parent = (g.uuid for g in sim.node_gpus("dra-1"))
    [mig] = [m.uuid for m in sim.nodes["dra-1"].gpu_views()[1].mig_devices]
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    client.create({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "legacy", "namespace": "ml"},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": "gpu-a"},
                 "containers": [{"name": "cuda", "image": "cuda:12",
                                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
    })  # fmt: skip
    for name, cls in (("whole", "gpu.nvidia.com"), ("slice", "mig.nvidia.com")):
        request = {"name": "gpu", "exactly": {"deviceClassName": cls}}
        client.create({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"devices": {"requests": [request]}},
        })  # fmt: skip
        client.create(claim_pod(f"{name}-pod", name))
    sim.settle()
    pods, allocatable = sim.podresources("gpu-a")
    fake_kubelet.set_pods(pods)
    fake_kubelet.set_allocatable(allocatable)
    api = cluster.connect(str(sim.kubeconfig))
    reportbuilders.install(api)
    with libnvml.installed(sim.nvml("gpu-a")):
        reporting.publish(api, reporting.Sources("gpu-a", kubelet_root=fake_kubelet.root), None)

    result = run_cli("--kubeconfig", str(sim.kubeconfig), "map", "-A", "-o", "json")

    assert result.exit_code == 0, result.stderr
    rows = {r["pod"]: r for r in result.json["items"]}
    [gpu] = sim.node_gpus("gpu-a")
    assert (rows["legacy"]["plane"], rows["legacy"]["node"], rows["legacy"]["gpu_uuid"]) == (
        "device-plugin", "gpu-a", gpu.uuid)  # fmt: skip
    assert (rows["whole-pod"]["plane"], rows["whole-pod"]["gpu_uuid"]) == ("dra", whole)
    slice_row = rows["slice-pod"]
    assert (slice_row["gpu_uuid"], slice_row["mig_uuid"], slice_row["container"]) == (
        parent, mig, "main")  # fmt: skip
    # what NVIDIA's plugin prepared for each pod's claim is the device the scheduler allocated
    assert sim.dra_kubelet is not None
    for pod in ("whole-pod", "slice-pod"):
        uid = client.get("pods", pod, "ml")["metadata"]["uid"]
        [claim] = sim.dra_kubelet.claims_of(uid)
        allocated = client.get("resourceclaims", claim.name, "ml")["status"]["allocation"]
        [result] = allocated["devices"]["results"]
        assert [(d.pool, d.device) for d in claim.devices] == [("dra-1", result["device"])]
    assert client.get("pods", "whole-pod", "ml")["status"]["phase"] == "Running"
    kubectl = kubectl_for(sim, tmp_path)
    listed = kubectl("get", "resourceclaims", "-n", "ml", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert {c["metadata"]["name"] for c in json.loads(listed.stdout)["items"]} == {"whole", "slice"}
