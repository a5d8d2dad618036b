"""NVIDIA's own GPU Feature Discovery (v0.19.3, unmodified) labels simulated GPU nodes through
Node Feature Discovery's own master (v0.19.0), as on a real cluster.

A `SimCluster` with a layout that runs GFD (Helm chart with GFD on, GPU
Operator): each GPU node's GFD pod runs NVIDIA's binary in the node's sandbox over the node's
libnvidia-ml.so.1, reading the config the node's device plugin reads; it writes a NodeFeature
object with a token of its pod's ServiceAccount (the layout's RBAC), and NFD's master makes the
Node's labels of it. What a user sees: `kubectl get node --show-labels`, `kubectl logs` of the
GFD pod, labels following a config switch, a MIG change and a pod restart.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import eventually
from tests.kit.cluster import NodeSpec
from tests.kit.cluster.cluster import SimCluster
from tests.kit.cluster.fixture import MakeSimCluster, kubectl_for
from tests.kit.node import sandbox
from tests.kit.plane import netns

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.timeout(300),
    pytest.mark.skipif(sandbox.unavailable() is not None, reason=str(sandbox.unavailable())),
    pytest.mark.skipif(netns.unavailable() is not None, reason=str(netns.unavailable())),
]

READING = Path(__file__).resolve().parents[1] / "data" / "nvidia"
TIMESTAMP = "nvidia.com/gfd.timestamp"
TIME_SLICED = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"  # noqa: E501
CONFIGS = {"default": "version: v1\n", "ts4": TIME_SLICED}


def real_reading() -> dict[str, str]:
    text = (READING / "h200-driver-580.159.04-gfd-v0.19.3-labels.txt").read_text()
    return dict(line.split("=", 1) for line in text.split())


def node_labels(cluster: SimCluster, node: str) -> dict[str, str]:
    found = cluster.store.get("nodes", node)["metadata"].get("labels") or {}
    return {k: v for k, v in found.items() if k.startswith("nvidia.com/")}


def node_feature(cluster: SimCluster, node: str) -> dict[str, str]:
    """The labels in GFD's NodeFeature object for `node` ({} until it exists)."""
    namespace = cluster.layout.namespace if cluster.layout else ""
    try:
        found = cluster.store.get(
            "nodefeatures.nfd.k8s-sigs.io", f"nvidia-features-for-{node}", namespace
        )
    except Exception:  # noqa: BLE001 - not there yet (or the CRD is not served yet)
        return {}
    return dict((found.get("spec") or {}).get("labels") or {})


def applied(cluster: SimCluster, node: str, timeout: float = 60.0) -> dict[str, str]:
    """GFD's labels once NFD's master has put every one of them on the Node."""

    def check() -> dict[str, str]:
        wanted = node_feature(cluster, node)
        have = node_labels(cluster, node)
        same = wanted and all(have.get(k) == v for k, v in wanted.items() if k != TIMESTAMP)
        return wanted if same else {}

    found = eventually(check, timeout)
    assert found, (
        f"GFD's labels never reached node {node}: NodeFeature {node_feature(cluster, node)}, "
        f"node {node_labels(cluster, node)}; nfd-master: {list(cluster.nfd_master.log)[-10:]}"
        if cluster.nfd_master
        else "no nfd-master"
    )
    return dict(found)


def test_nvidias_gfd_labels_a_simulated_h200_as_it_labelled_a_real_one(
    sim_cluster: MakeSimCluster, tmp_path: Path
) -> None:
    cluster = sim_cluster([NodeSpec("h200-node", "H200-SXM-141GB", 1)], "helm", node_networks=True)
    labels = applied(cluster, "h200-node")
    real = real_reading()
    # the reading was taken with --no-timestamp; the chart's GFD stamps each labelling
    assert labels.pop(TIMESTAMP).isdigit()
    assert labels == real
    on_node = node_labels(cluster, "h200-node")
    assert {k: on_node[k] for k in real} == real
    # NFD's master records what it wrote, so that a label GFD drops is removed from the node
    notes = cluster.store.get("nodes", "h200-node")["metadata"]["annotations"]
    assert "nvidia.com/gpu.product" in notes["nfd.node.kubernetes.io/feature-labels"].split(",")
    # `kubectl logs` of the GFD pod is NVIDIA's own output
    pods = cluster.store.list("pods", cluster.layout.namespace if cluster.layout else "")
    gfd = next(p for p in pods if "feature-discovery" in p["metadata"]["name"])
    kubectl = kubectl_for(cluster, tmp_path)
    logs = kubectl("logs", "-n", gfd["metadata"]["namespace"], gfd["metadata"]["name"],
                   "-c", "gpu-feature-discovery-ctr")  # fmt: skip
    assert "Running with config:" in logs.stdout and "NodeFeature" in logs.stdout, logs.stdout


def test_a_config_switch_relabels_the_node_shared(sim_cluster: MakeSimCluster) -> None:
    cluster = sim_cluster(
        [NodeSpec("gpu-1", "H100-SXM5-80GB", 2)], "helm", configs=CONFIGS,
        default_config="default", node_networks=True,
    )  # fmt: skip
    before = applied(cluster, "gpu-1")
    assert (before["nvidia.com/gpu.product"], before["nvidia.com/gpu.replicas"]) == (
        "NVIDIA-H100-80GB-HBM3",
        "1",
    )
    body = {"metadata": {"labels": {"nvidia.com/device-plugin.config": "ts4"}}}
    cluster.store.patch("nodes", "gpu-1", body)

    def shared() -> bool:
        labels = node_labels(cluster, "gpu-1")
        return labels.get("nvidia.com/gpu.product") == "NVIDIA-H100-80GB-HBM3-SHARED"

    assert eventually(shared, 60), node_labels(cluster, "gpu-1")
    labels = node_labels(cluster, "gpu-1")
    assert (labels["nvidia.com/gpu.replicas"], labels["nvidia.com/gpu.sharing-strategy"]) == (
        "4",
        "time-slicing",
    )
    assert labels["nvidia.com/gpu.count"] == "2"  # physical GPUs, not replicas


def test_a_mig_change_relabels_the_node_by_profile(sim_cluster: MakeSimCluster) -> None:
    # The GPU Operator's GFD runs MIG strategy single (its ClusterPolicy's mig.strategy).
    cluster = sim_cluster(
        [NodeSpec("gpu-1", "A100-SXM4-40GB", 1)], "gpu-operator", node_networks=True
    )
    before = applied(cluster, "gpu-1")
    assert before["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"
    assert before["nvidia.com/mig.strategy"] == "single"
    cluster.set_mig("gpu-1", 0, ["1g.5gb"] * 7)

    def relabelled() -> bool:
        product = node_labels(cluster, "gpu-1").get("nvidia.com/gpu.product", "")
        return product == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"

    assert eventually(relabelled, 60), node_labels(cluster, "gpu-1")
    labels = node_labels(cluster, "gpu-1")
    assert (labels["nvidia.com/gpu.count"], labels["nvidia.com/gpu.memory"]) == ("7", "4864")


def test_deleting_the_gfd_pod_ends_nvidias_process_and_the_new_pod_labels_again(
    sim_cluster: MakeSimCluster,
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-1", "L4", 1)], "helm", node_networks=True)
    applied(cluster, "gpu-1")
    runtime = cluster.gfd
    old = eventually(lambda: runtime.program_pid("gpu-1"), 30)
    assert old
    namespace = cluster.layout.namespace if cluster.layout else ""
    pod = next(
        p for p in cluster.store.list("pods", namespace)
        if "feature-discovery" in p["metadata"]["name"]
    )  # fmt: skip
    cluster.store.delete("pods", pod["metadata"]["name"], namespace)
    new = eventually(
        lambda: (pid := runtime.program_pid("gpu-1")) and pid != old and pid,
        60,
    )
    assert new and new != old
    assert not Path(f"/proc/{old}").exists()
    assert applied(cluster, "gpu-1")["nvidia.com/gpu.product"] == "NVIDIA-L4"
