"""A DRA node end to end: NVIDIA's own DRA kubelet plugin (v0.4.1) publishes the node's GPUs
from the node's libnvidia-ml.so.1, the real scheduler allocates a claim, the node's kubelet
stand-in has NVIDIA's plugin prepare it, PodResources `List` names the prepared device in
`dynamic_resources`, the agent's reporting pass publishes it with the node's NVML inventory, and
`kubectl gpu map` shows one row: the container the node saw, the physical GPU the slice names,
its NVML index and model, plane dra. On the real control plane."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kubectl_gpu import cluster
from kubectl_gpu.agent import reporting
from tests.agent.fixtures import node_nvml
from tests.conftest import CliResult
from tests.gpumap import reportbuilders
from tests.kit.cluster import NodeSpec
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.node import sandbox
from tests.kit.node.kubelet import Claim, FakeKubelet

Run = Callable[..., CliResult]
pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(sandbox.unavailable() is not None, reason=str(sandbox.unavailable())),
]


def test_the_agent_reports_a_claims_device_and_map_shows_its_physical_gpu(
    sim_cluster: MakeSimCluster, fake_kubelet: FakeKubelet, run_cli: Run
) -> None:
    sim = sim_cluster([NodeSpec("dra-1", "A100-SXM4-80GB", 2, dra=True)], controllers=())
    gpus = sim.node_gpus("dra-1")
    sim.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    sim.client.create({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "train-gpu", "namespace": "ml"},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
    })  # fmt: skip
    sim.client.create({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": "dra-1"},
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": "train-gpu"}],
                 "containers": [{"name": "main", "image": "cuda:12",
                                 "resources": {"claims": [{"name": "gpu"}]}}]},
    })  # fmt: skip
    sim.settle()  # the scheduler allocated the claim, KWOK ran the pod, NVIDIA's plugin prepared
    result = sim.client.get("resourceclaims", "train-gpu", "ml")["status"]["allocation"]
    device = result["devices"]["results"][0]["device"]
    pods, _ = sim.podresources("dra-1")  # what the node's kubelet lists: NVIDIA's prepared device
    [pod] = [p for p in pods if p.name == "train"]
    assert pod.containers[0].claims == (
        Claim("train-gpu", "ml", (("gpu.nvidia.com", "dra-1", device),)),
    )
    fake_kubelet.set_pods(pods)
    api = cluster.connect(str(sim.kubeconfig))
    reportbuilders.install(api)

    with node_nvml(sim, "dra-1"):
        reporting.publish(api, reporting.Sources("dra-1", kubelet_root=fake_kubelet.root), None)

    mapped = run_cli("--kubeconfig", str(sim.kubeconfig), "map", "-A", "-o", "json")
    assert mapped.exit_code == 0, mapped.stderr
    [row] = mapped.json["items"]
    held = next(g for g in gpus if f"gpu-{g.index}" == device)
    assert (row["plane"], row["pod"], row["container"]) == ("dra", "train", "main")
    assert (row["gpu_uuid"], row["gpu_index"], row["gpu_model"]) == (
        held.uuid,
        held.index,
        held.name,
    )
    assert row["resource"] == "claim:train-gpu/gpu"
