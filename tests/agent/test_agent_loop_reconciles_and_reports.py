"""`kubectl-gpu-agent --once` as the DaemonSet runs it: one pass reconciles the node's MIG
layout and publishes its GPU report; a failing report does not hide a good reconcile.

On the real control plane: the report is written to the real server's CRD (validated by its
schema), and without the CRD the real server's 404 fails the pass."""

from __future__ import annotations

from pathlib import Path

from kubectl_gpu import agent, cluster, keys
from tests.agent.fixtures import node_nvml
from tests.gpumap import reportbuilders
from tests.kit.cluster import NodeSpec
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.node.kubelet import FakeKubelet


def run_once(node: str, kubelet_root: Path, heartbeat: Path, kubeconfig: Path) -> int:
    argv = ["--once", "--node-name", node, "--kubelet-root", str(kubelet_root)]
    argv += ["--kubeconfig", str(kubeconfig)]
    return agent.main([*argv, "--heartbeat", str(heartbeat), "--timeout", "5"])


def test_one_pass_publishes_the_report_and_beats(
    sim_cluster: MakeSimCluster,
    fake_kubelet: FakeKubelet,
    tmp_path: Path,
) -> None:
    sim = sim_cluster([NodeSpec("gpu-a", "H100-SXM5-80GB", 2)], layout="helm")
    reportbuilders.install(cluster.connect(str(sim.kubeconfig)))
    heartbeat = tmp_path / "beat"

    with node_nvml(sim, "gpu-a"):
        status = run_once("gpu-a", fake_kubelet.root, heartbeat, sim.kubeconfig)

    assert status == 0 and heartbeat.exists()
    stored = sim.client.get("gpunodereports.kubectl-gpu.io", "gpu-a")
    assert [g["uuid"] for g in stored["status"]["gpus"]] == [g.uuid for g in sim.node_gpus("gpu-a")]
    assert keys.MIG_STATE_LABEL not in sim.client.get("nodes", "gpu-a")["metadata"]["labels"]


def test_a_report_that_cannot_be_written_fails_the_pass_but_still_beats(
    sim_cluster: MakeSimCluster,
    fake_kubelet: FakeKubelet,
    tmp_path: Path,
) -> None:
    sim = sim_cluster([NodeSpec("gpu-a", "H100-SXM5-80GB", 1)], layout="helm")
    # no report CRD installed: the report write gets a 404
    heartbeat = tmp_path / "beat"

    with node_nvml(sim, "gpu-a"):
        status = run_once("gpu-a", fake_kubelet.root, heartbeat, sim.kubeconfig)

    assert status == 1 and heartbeat.exists()
