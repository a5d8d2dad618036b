"""MIG strategies none, single and mixed over MIG devices made on the node's NVML library, as
NVIDIA's device plugin v0.19.3 advertises them (docs/upstream-facts.md P4); its refusals are in
its own words in the plugin container's log."""

from __future__ import annotations

import pytest

from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

MIXED_LAYOUT = {0: ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"], 1: ["7g.80gb"]}


def config(strategy: str, sharing: str = "") -> str:
    return f"version: v1\nflags:\n  migStrategy: {strategy}\n{sharing}"


CONFIGS = {
    "none": config("none"),
    "single": config("single"),
    "mixed": config("mixed"),
    "mixed-shared": config(
        "mixed",
        "sharing:\n  timeSlicing:\n    resources:\n"
        "    - name: nvidia.com/mig-1g.10gb\n      replicas: 2\n",
    ),
    "none-shared-mig": config(
        "none",
        "sharing:\n  timeSlicing:\n    resources:\n"
        "    - name: nvidia.com/mig-1g.10gb\n      replicas: 2\n",
    ),
}


def mig_cluster(make: MakeSimCluster, mig: dict[int, list[str]], key: str) -> SimCluster:
    node = NodeSpec(
        "gpu-a", "A100-SXM4-80GB", 4, labels={"nvidia.com/device-plugin.config": key}, mig=mig
    )
    return make([node], layout="helm", configs=CONFIGS, default_config="none")


def said(cluster: SimCluster) -> str:
    """The plugin container's log, the run before the last restart included."""
    return cluster.plugin_log("gpu-a", previous=True) + cluster.plugin_log("gpu-a")


def nvidia(cluster: SimCluster) -> dict[str, str]:
    allocatable = cluster.store.get("nodes", "gpu-a")["status"]["allocatable"]
    return {k: v for k, v in allocatable.items() if k.startswith("nvidia.com/") and v != "0"}


def test_mixed_names_a_resource_per_profile_and_keeps_whole_gpus(
    sim_cluster: MakeSimCluster,
) -> None:
    cluster = mig_cluster(sim_cluster, MIXED_LAYOUT, "mixed")
    assert nvidia(cluster) == {
        "nvidia.com/gpu": "2",
        "nvidia.com/mig-1g.10gb": "2",
        "nvidia.com/mig-2g.20gb": "1",
        "nvidia.com/mig-3g.40gb": "1",
        "nvidia.com/mig-7g.80gb": "1",
    }
    gpu0 = cluster.node_gpus("gpu-a")[0]
    small = sorted(ci.uuid for gi, ci in gpu0.mig.mig_devices() if gi.profile.name == "1g.10gb")
    assert sorted(cluster.advertised("gpu-a")["nvidia.com/mig-1g.10gb"]) == small
    assert all(i.startswith("MIG-") for i in small)
    labels = cluster.store.get("nodes", "gpu-a")["metadata"]["labels"]
    assert labels["nvidia.com/mig.strategy"] == "mixed"
    assert labels["nvidia.com/mig-1g.10gb.count"] == "2"
    assert labels["nvidia.com/mig-1g.10gb.product"] == "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"
    assert labels["nvidia.com/mig-3g.40gb.slices.gi"] == "3"
    # NVIDIA's GFD counts every GPU of a mixed node in its full-GPU labels (docs/simulated-node.md)
    assert labels["nvidia.com/gpu.count"] == str(len(cluster.node_gpus("gpu-a")))


def test_mixed_time_slices_mig_resources_and_none_skips_mig_names(
    sim_cluster: MakeSimCluster,
) -> None:
    cluster = mig_cluster(sim_cluster, MIXED_LAYOUT, "mixed-shared")
    assert nvidia(cluster)["nvidia.com/mig-1g.10gb"] == "4"
    assert all("::" in i for i in cluster.advertised("gpu-a")["nvidia.com/mig-1g.10gb"])
    assert "::" not in "".join(cluster.advertised("gpu-a")["nvidia.com/mig-3g.40gb"])
    cluster.store.patch(
        "nodes",
        "gpu-a",
        {"metadata": {"labels": {"nvidia.com/device-plugin.config": "none-shared-mig"}}},
    )
    cluster.settle()
    # Under none the name matches no device (skipped, docs/upstream-facts.md P1.5); MIG-enabled
    # GPUs count whole.
    assert {k: v for k, v in nvidia(cluster).items()} == {"nvidia.com/gpu": "4"}


def test_single_advertises_every_mig_device_as_gpu(sim_cluster: MakeSimCluster) -> None:
    cluster = mig_cluster(sim_cluster, {i: ["1g.10gb"] * 7 for i in range(4)}, "single")
    assert nvidia(cluster) == {"nvidia.com/gpu": "28"}
    labels = cluster.store.get("nodes", "gpu-a")["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"
    assert labels["nvidia.com/gpu.count"] == "28"
    assert labels["nvidia.com/mig.strategy"] == "single"


@pytest.mark.parametrize(
    ("mig", "error"),
    [
        (
            {i: ["3g.40gb", "3g.40gb"] for i in range(3)} | {3: ["7g.80gb"]},
            "more than one MIG device type present on node",
        ),
        # GPUs 2 and 3 have MIG off, but v0.19.3 checks the MIG device types first (the
        # Python stand-in said "all devices on the node must be configured with the same
        # migEnabled value")
        (MIXED_LAYOUT, "more than one MIG device type present on node"),
        ({0: ["1g.10gb"]}, "all devices on the node must be configured with the same migEnabled"),
        ({0: [], 1: ["1g.10gb"], 2: ["1g.10gb"], 3: ["1g.10gb"]}, "device 0 has no MIG devices"),
    ],
)
def test_single_refuses_layouts_it_cannot_name(
    sim_cluster: MakeSimCluster, mig: dict[int, list[str]], error: str
) -> None:
    cluster = mig_cluster(sim_cluster, mig, "single")
    assert nvidia(cluster) == {}
    assert error in said(cluster)
    labels = cluster.store.get("nodes", "gpu-a")["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-MIG-INVALID"
    assert labels["nvidia.com/gpu.count"] == "0"


def test_mixed_advertises_a_compute_instance_sub_profile_as_its_gpu_instance_profile(
    sim_cluster: MakeSimCluster,
) -> None:
    # v0.19.3 makes a resource per C == G profile and matches a MIG device's profile against
    # those patterns unanchored (api/config/v1 ResourcePattern.Matches): "1c.3g.40gb" contains
    # "3g.40gb". The Python stand-in had the plugin fail ("does not match any resource
    # patterns").
    cluster = mig_cluster(sim_cluster, {0: ["1c.3g.40gb"]}, "mixed")
    assert nvidia(cluster) == {"nvidia.com/gpu": "3", "nvidia.com/mig-3g.40gb": "1"}
    assert "does not match any resource patterns" not in said(cluster)


def test_none_still_advertises_a_mig_enabled_gpu_whole(sim_cluster: MakeSimCluster) -> None:
    cluster = mig_cluster(sim_cluster, MIXED_LAYOUT, "none")
    assert nvidia(cluster) == {"nvidia.com/gpu": "4"}
    assert (
        "nvidia.com/mig.strategy" not in cluster.store.get("nodes", "gpu-a")["metadata"]["labels"]
    )


def test_a_repartition_shows_only_after_the_plugin_restarts(sim_cluster: MakeSimCluster) -> None:
    cluster = mig_cluster(sim_cluster, {}, "mixed")
    assert nvidia(cluster) == {"nvidia.com/gpu": "4"}
    cluster.set_mig("gpu-a", 3, ["3g.40gb", "3g.40gb"])
    cluster.settle()
    assert nvidia(cluster) == {"nvidia.com/gpu": "4"}  # no rediscovery (issue #992)
    cluster.restart_plugin("gpu-a")
    assert nvidia(cluster) == {"nvidia.com/gpu": "3", "nvidia.com/mig-3g.40gb": "2"}
    assert cluster.capacity("gpu-a") == 3
