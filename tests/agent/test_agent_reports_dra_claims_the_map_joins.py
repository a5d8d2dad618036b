"""A DRA node end to end: the simulated NVIDIA DRA driver publishes the node's GPUs (the NVML
stand-in's UUIDs), the real scheduler allocates a claim, kubelet's PodResources `List` names
the claim's device in `dynamic_resources`, the agent's reporting pass publishes it with the
node's NVML inventory, and `kubectl gpu map` shows one row: the container the node saw, the
physical GPU the slice names, its NVML index and model, plane dra. On the real control plane."""

from __future__ import annotations

from collections.abc import Callable

from kubectl_gpu import cluster
from kubectl_gpu.agent import reporting
from tests.agent.fixtures import node_nvml
from tests.conftest import CliResult
from tests.fakes.cluster import NodeSpec, dradriver
from tests.fakes.cluster.dradriver import DraGpu
from tests.fakes.cluster.fixture import MakeSimCluster
from tests.fakes.kubelet import Claim, Container, FakeKubelet, Pod
from tests.gpumap import reportbuilders

Run = Callable[..., CliResult]


def test_the_agent_reports_a_claims_device_and_map_shows_its_physical_gpu(
    sim_cluster: MakeSimCluster, fake_kubelet: FakeKubelet, run_cli: Run
) -> None:
    sim = sim_cluster([NodeSpec("dra-1", "A100-SXM4-80GB", 2)], controllers=())
    gpus = sim.node_gpus("dra-1")
    sim.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    dradriver.install(sim.store, {"dra-1": [DraGpu(g.index, g.uuid) for g in gpus]})
    sim.store.create({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "train-gpu", "namespace": "ml"},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
    })  # fmt: skip
    sim.store.create({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": "dra-1"},
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": "train-gpu"}],
                 "containers": [{"name": "main", "image": "cuda:12",
                                 "resources": {"claims": [{"name": "gpu"}]}}]},
    })  # fmt: skip
    sim.settle()  # the scheduler has allocated the claim and bound the pod
    result = sim.store.get("resourceclaims", "train-gpu", "ml")["status"]["allocation"]
    device = result["devices"]["results"][0]["device"]
    claim = Claim("train-gpu", "ml", (("gpu.nvidia.com", "dra-1", device),))
    fake_kubelet.set_pods([Pod("train", "ml", (Container("main", claims=(claim,)),))])
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
