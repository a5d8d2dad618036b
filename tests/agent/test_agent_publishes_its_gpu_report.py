"""The agent's reporting pass reads the node's real sources (NVML through pynvml, kubelet's
checkpoint file and PodResources socket) and publishes a GPUNodeReport only on change; then
`kubectl gpu map` shows each pod on its physical GPU and replica.

On the real control plane: the real scheduler places the pods, the report is stored by the real
server's CRD, and its writes are counted in the real server's audit log."""

from __future__ import annotations

from collections.abc import Callable

from kubectl_gpu import cluster
from kubectl_gpu.agent import reporting
from tests.agent.fixtures import node_nvml
from tests.cli import clirequests
from tests.conftest import CliResult
from tests.gpumap import reportbuilders
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.node.kubelet import FakeKubelet

Run = Callable[..., CliResult]
TIME_SLICED = (
    "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
    "    - name: nvidia.com/gpu\n      replicas: 3\n"
)


def gpu_pod(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "containers": [
                {
                    "name": "cuda",
                    "image": "cuda:12",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ]
        },
    }


def node_with_three_pods(sim_cluster: MakeSimCluster, kubelet: FakeKubelet) -> SimCluster:
    sim = sim_cluster(
        [NodeSpec("gpu-a", "L4", 1)],
        layout="helm",
        configs={"ts": TIME_SLICED},
        default_config="ts",
    )
    sim.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    for i in range(3):
        sim.client.create(gpu_pod(f"train-{i}"))
    sim.settle()
    pods, allocatable = sim.podresources("gpu-a")
    kubelet.set_pods(pods)
    kubelet.set_allocatable(allocatable)
    kubelet.write_checkpoint("current")
    return sim


def writes_of_reports(sim: SimCluster, start: int) -> int:
    """Report writes sent since `start` (the agent's reporting pass runs in this process)."""
    return sum(
        1
        for r in clirequests.since(sim, start)
        if "gpunodereports" in r and r.split()[0] in ("create", "update", "patch")
    )


def test_report_is_read_from_the_node_and_published_once(
    sim_cluster: MakeSimCluster, fake_kubelet: FakeKubelet, run_cli: Run
) -> None:
    sim = node_with_three_pods(sim_cluster, fake_kubelet)
    api = cluster.connect(str(sim.kubeconfig))
    reportbuilders.install(api)
    sources = reporting.Sources("gpu-a", kubelet_root=fake_kubelet.root, timeout=5)
    start = clirequests.mark(sim)

    with node_nvml(sim, "gpu-a"):
        digest = reporting.publish(api, sources, None).digest
        again = reporting.publish(api, sources, digest).digest

    assert again == digest and writes_of_reports(sim, start) == 1
    result = run_cli("--kubeconfig", str(sim.kubeconfig), "map", "-A", "-o", "json")
    assert result.exit_code == 0, result.stderr
    [gpu] = sim.node_gpus("gpu-a")
    rows = {r["pod"]: r for r in result.json["items"]}
    assert sorted(rows) == ["train-0", "train-1", "train-2"]
    assert {r["gpu_uuid"] for r in rows.values()} == {gpu.uuid}
    assert sorted(r["replica"] for r in rows.values()) == [0, 1, 2]
    assert {(r["gpu_index"], r["gpu_model"], r["source"]) for r in rows.values()} == {
        (0, gpu.name, "podresources")
    }


def test_a_dead_kubelet_socket_still_yields_a_report_from_the_checkpoint(
    sim_cluster: MakeSimCluster, fake_kubelet: FakeKubelet, run_cli: Run
) -> None:
    sim = node_with_three_pods(sim_cluster, fake_kubelet)
    fake_kubelet.stop()
    api = cluster.connect(str(sim.kubeconfig))
    reportbuilders.install(api)
    sources = reporting.Sources("gpu-a", kubelet_root=fake_kubelet.root, timeout=1)

    with node_nvml(sim, "gpu-a"):
        reporting.publish(api, sources, None)

    result = run_cli("--kubeconfig", str(sim.kubeconfig), "map", "-A", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert {r["source"] for r in result.json["items"]} == {"checkpoint"}
    assert len(result.json["items"]) == 3


def test_a_node_whose_nvml_cannot_be_read_says_why_in_map_and_status(
    sim_cluster: MakeSimCluster, fake_kubelet: FakeKubelet, run_cli: Run
) -> None:
    # No NVML stand-in installed: pynvml finds no libnvidia-ml.so.1, as in an agent pod
    # started without the NVIDIA runtime class.
    sim = node_with_three_pods(sim_cluster, fake_kubelet)
    api = cluster.connect(str(sim.kubeconfig))
    reportbuilders.install(api)
    sources = reporting.Sources("gpu-a", kubelet_root=fake_kubelet.root, timeout=5)

    reporting.publish(api, sources, None)

    shown = run_cli("--kubeconfig", str(sim.kubeconfig), "map", "-A")
    status = run_cli("--kubeconfig", str(sim.kubeconfig), "status", "-o", "json")
    assert "node gpu-a: the agent cannot read the GPUs through NVML" in shown.stderr
    assert status.exit_code == 1
    [blind] = status.json["nodesWithoutGpus"]
    assert blind["node"] == "gpu-a" and "NVML" in blind["reason"]
