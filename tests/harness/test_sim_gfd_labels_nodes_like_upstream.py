"""GPU Feature Discovery's node labels in the simulated cluster (docs/upstream-facts.md P2.3)."""

from __future__ import annotations

import pytest

from tests.conftest import eventually
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

SHARED = "sharing:\n  {block}:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"
CONFIGS = {
    "default": "version: v1\n",
    "ts4": "version: v1\n" + SHARED.format(block="timeSlicing"),
    "mps4": "version: v1\n" + SHARED.format(block="mps"),
    # Both blocks: MPS wins and timeSlicing is dropped without a word (docs/upstream-facts.md P1.5).
    "both": "version: v1\n" + SHARED.format(block="mps") + "  timeSlicing:\n    resources:\n"
    "    - name: nvidia.com/gpu\n      replicas: 9\n",
}


@pytest.fixture(params=["helm", "gpu-operator"])
def cluster(request: pytest.FixtureRequest, sim_cluster: MakeSimCluster) -> SimCluster:
    nodes = [NodeSpec("gpu-h", "H100-SXM5-80GB", 8), NodeSpec("gpu-l", "L4", 2), NodeSpec("cpu-1")]
    return sim_cluster(nodes, layout=request.param, configs=CONFIGS, default_config="default")


def labels(cluster: SimCluster, node: str) -> dict[str, str]:
    found = cluster.store.get("nodes", node)["metadata"]["labels"]
    return {k: v for k, v in found.items() if k.startswith("nvidia.com/")}


def labelled(cluster: SimCluster, node: str, wanted: dict[str, str]) -> dict[str, str]:
    """The node's labels once they hold `wanted`: NVIDIA's GFD labels
    through a NodeFeature object and NFD's master, a moment after the change."""

    def check() -> dict[str, str]:
        found = labels(cluster, node)
        return found if all(found.get(k) == v for k, v in wanted.items()) else {}

    found: dict[str, str] = eventually(check, 60)
    assert found, f"{node}: never labelled {wanted}: {labels(cluster, node)}"
    return found


def use(cluster: SimCluster, node: str, key: str) -> None:
    body = {"metadata": {"labels": {"nvidia.com/device-plugin.config": key}}}
    cluster.store.patch("nodes", node, body)
    cluster.settle()


def test_unshared_gpus_are_described_as_gfd_does(cluster: SimCluster) -> None:
    h100 = labelled(cluster, "gpu-h", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    assert {
        k: h100[k]
        for k in (
            "nvidia.com/gpu.present",
            "nvidia.com/gpu.product",
            "nvidia.com/gpu.count",
            "nvidia.com/gpu.memory",
            "nvidia.com/gpu.family",
            "nvidia.com/gpu.compute.major",
            "nvidia.com/gpu.compute.minor",
            "nvidia.com/gpu.replicas",
            "nvidia.com/gpu.sharing-strategy",
            "nvidia.com/mig.capable",
            "nvidia.com/mps.capable",
        )
    } == {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.family": "hopper",
        "nvidia.com/gpu.compute.major": "9",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mps.capable": "false",
    }
    l4 = labelled(cluster, "gpu-l", {"nvidia.com/gpu.product": "NVIDIA-L4"})
    assert (l4["nvidia.com/gpu.product"], l4["nvidia.com/gpu.family"]) == (
        "NVIDIA-L4",
        "ada-lovelace",
    )
    assert l4["nvidia.com/mig.capable"] == "false"
    # The operator passes MIG_STRATEGY=single from its ClusterPolicy; the chart sets none.
    expected = "single" if cluster.layout and cluster.layout.name == "gpu-operator" else None
    assert l4.get("nvidia.com/mig.strategy") == expected
    assert not any(k.startswith("nvidia.com/gpu.product") for k in labels(cluster, "cpu-1"))


def test_time_slicing_marks_the_product_shared(cluster: SimCluster) -> None:
    use(cluster, "gpu-h", "ts4")
    h100 = labelled(cluster, "gpu-h", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED"})
    assert h100["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-SHARED"
    assert (h100["nvidia.com/gpu.replicas"], h100["nvidia.com/gpu.sharing-strategy"]) == (
        "4",
        "time-slicing",
    )
    assert h100["nvidia.com/gpu.count"] == "8"  # the physical count
    assert labelled(cluster, "gpu-l", {"nvidia.com/gpu.replicas": "1"})


def test_mps_wins_over_time_slicing_and_makes_the_node_mps_capable(cluster: SimCluster) -> None:
    use(cluster, "gpu-l", "both")
    l4 = labelled(cluster, "gpu-l", {"nvidia.com/gpu.sharing-strategy": "mps"})
    assert (l4["nvidia.com/gpu.replicas"], l4["nvidia.com/gpu.sharing-strategy"]) == ("4", "mps")
    assert l4["nvidia.com/mps.capable"] == "true"
    assert cluster.allocatable("gpu-l") == 8
    use(cluster, "gpu-l", "default")
    assert labelled(cluster, "gpu-l", {"nvidia.com/gpu.sharing-strategy": "none"})
    assert labels(cluster, "gpu-l")["nvidia.com/mps.capable"] == "false"


def test_stale_mig_labels_go_when_the_layout_goes(sim_cluster: MakeSimCluster) -> None:
    mixed = {"default": "version: v1\nflags:\n  migStrategy: mixed\n"}
    node = NodeSpec("gpu-h", "H100-SXM5-80GB", 2, mig={0: ["3g.40gb", "3g.40gb"]})
    cluster = sim_cluster([node], layout="helm", configs=mixed, default_config="default")
    assert labelled(cluster, "gpu-h", {"nvidia.com/mig-3g.40gb.count": "2"})
    cluster.set_mig("gpu-h", 0, None)
    assert eventually(lambda: "nvidia.com/mig-3g.40gb.count" not in labels(cluster, "gpu-h"), 60)
    assert (
        labels(cluster, "gpu-h")["nvidia.com/gpu.count"] == "2"
    )  # GFD re-reads NVML each interval
