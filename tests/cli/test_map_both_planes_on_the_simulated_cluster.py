"""Both planes on the simulated cluster: a device-plugin node whose pod the real scheduler
places and the simulated kubelet and NVIDIA device plugin serve, reported by the real agent's
reporting pass (NVML and PodResources stand-ins), next to a DRA node the simulated NVIDIA DRA
driver serves (whole GPU and MIG partition, its ResourceSlice only): the real scheduler
allocates the claims and KWOK runs the pods. One `kubectl gpu map -A` shows both, each on its
physical GPU, and the real kubectl sees the same claims."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from kubectl_gpu import cluster
from kubectl_gpu.agent import reporting
from tests.conftest import CliResult
from tests.fakes import libnvml
from tests.fakes.cluster import NodeSpec, dranodes
from tests.fakes.cluster.dradriver import DraGpu, MigSlot
from tests.fakes.cluster.fixture import MakeSimCluster, kubectl_for
from tests.fakes.kubelet import FakeKubelet
from tests.gpumap import reportbuilders

Run = Callable[..., CliResult]
WHOLE, PARENT, MIG = (
    "GPU-d0d0d0d0-0000-4000-8000-000000000001",
    "GPU-d0d0d0d0-0000-4000-8000-000000000002",
    "MIG-d0d0d0d0-0000-4000-8000-000000000003",
)  # noqa: E501


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
    sim = sim_cluster([NodeSpec("gpu-a", "L4", 1)], layout="helm")
    store = sim.store
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    store.create({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "legacy", "namespace": "ml"},
        "spec": {"containers": [{"name": "cuda", "image": "cuda:12",
                                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
    })  # fmt: skip
    dranodes.publish(store, {"dra-1": [
        DraGpu(0, WHOLE), DraGpu(1, PARENT, migs=(MigSlot("3g.40gb", MIG, 40, 42),))]})  # fmt: skip
    for name, cls in (("whole", "gpu.nvidia.com"), ("slice", "mig.nvidia.com")):
        request = {"name": "gpu", "exactly": {"deviceClassName": cls}}
        store.create({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"devices": {"requests": [request]}},
        })  # fmt: skip
        store.create(claim_pod(f"{name}-pod", name))
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
    assert (rows["whole-pod"]["plane"], rows["whole-pod"]["gpu_uuid"]) == ("dra", WHOLE)
    slice_row = rows["slice-pod"]
    assert (slice_row["gpu_uuid"], slice_row["mig_uuid"], slice_row["container"]) == (
        PARENT, MIG, "main")  # fmt: skip
    assert store.get("pods", "whole-pod", "ml")["status"]["phase"] == "Running"
    kubectl = kubectl_for(sim, tmp_path)
    listed = kubectl("get", "resourceclaims", "-n", "ml", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert {c["metadata"]["name"] for c in json.loads(listed.stdout)["items"]} == {"whole", "slice"}
