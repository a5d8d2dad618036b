"""`mig validate --node`, `doctor` and `install`'s pre-flight read the node labels NVIDIA's own
GFD v0.19.3 wrote (through NFD's master v0.19.0) on simulated GPU nodes: MIG under the single
and mixed strategies, time-slicing's `-SHARED` product, replicas and sharing strategy."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.cli.doctorpods import gpu_pod, run_pods
from tests.conftest import ROOT, CliResult, eventually
from tests.kit.cluster import NodeSpec
from tests.kit.cluster.cluster import WITH_MIG_MANAGER, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import layouts
from tests.kit.node import sandbox
from tests.kit.plane import netns

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(sandbox.unavailable() is not None, reason=str(sandbox.unavailable())),
    pytest.mark.skipif(netns.unavailable() is not None, reason=str(netns.unavailable())),
]
Run = Callable[..., CliResult]
CONFIG = "nvidia.com/device-plugin.config"
PRODUCT = "nvidia.com/gpu.product"
TS4 = """version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 4
"""
MIXED = "version: v1\nflags:\n  migStrategy: mixed\n"
CONFIGS = {"default": "version: v1\n", "ts4": TS4, "mixed": MIXED}
# NVIDIA's default MIG configs (mig-parted's)
MIG_CONFIGS = str(ROOT / "tests/data/mig/mig-parted__deployments__systemd__config-default.yaml")


def gpu(run_cli: Run, cluster: SimCluster, *args: str) -> CliResult:
    return run_cli("--kubeconfig", str(cluster.kubeconfig), *args)


def labelled(cluster: SimCluster, node: str, key: str, value: str) -> dict[str, str]:
    """The node's labels once NVIDIA's GFD (through NFD's master) has set `key` to `value`."""

    def check() -> dict[str, str]:
        labels = cluster.client.get("nodes", node)["metadata"].get("labels") or {}
        return dict(labels) if labels.get(key) == value else {}

    found: dict[str, str] = eventually(check, 90)
    now = cluster.client.get("nodes", node)["metadata"].get("labels")
    assert found, f"{node}: {key} never became {value}: {now}"
    return found


def test_validate_and_doctor_read_a_time_sliced_node_as_gfd_labels_it(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster(
        [NodeSpec("gpu-1", "H100-SXM5-80GB", 2, labels={CONFIG: "ts4"})], "helm",
        configs=CONFIGS, default_config="default", node_networks=True,
    )  # fmt: skip
    labels = labelled(cluster, "gpu-1", PRODUCT, "NVIDIA-H100-80GB-HBM3-SHARED")
    assert (labels["nvidia.com/gpu.replicas"], labels["nvidia.com/gpu.sharing-strategy"]) == (
        "4",
        "time-slicing",
    )
    # validate strips the -SHARED GFD adds: the node is two H100s (--strategy: the plugin runs
    # none, which would refuse any MIG layout)
    result = gpu(run_cli, cluster, "mig", "validate", "-f", MIG_CONFIGS, "-c", "all-1g.10gb",
                 "--node", "gpu-1", "--strategy", "mixed")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "gpu-1" in result.stdout and "0-1" in result.stdout and "H100-80GB" in result.stdout
    # a pod selecting the unshared product stays Pending; doctor names the renamed label
    run_pods(cluster, gpu_pod("train", selector={PRODUCT: "NVIDIA-H100-80GB-HBM3"}))
    result = gpu(run_cli, cluster, "doctor", "train")
    assert result.exit_code == 1, result.stdout + result.stderr
    assert "sharing renamed the product label to NVIDIA-H100-80GB-HBM3-SHARED" in result.stdout


def test_validate_reads_mig_nodes_under_single_and_mixed_as_gfd_labels_them(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    seven = ["1g.10gb"] * 7
    cluster = sim_cluster(
        [
            NodeSpec("single", "H100-SXM5-80GB", 1, mig={0: seven}),
            NodeSpec("mixed", "H100-SXM5-80GB", 1, labels={CONFIG: "mixed"}, mig={0: seven}),
        ],
        "helm", configs={**CONFIGS, "default": "version: v1\nflags:\n  migStrategy: single\n"},
        default_config="default", node_networks=True,
    )  # fmt: skip
    labelled(cluster, "single", PRODUCT, "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb")
    labels = labelled(cluster, "mixed", "nvidia.com/mig-1g.10gb.count", "7")
    assert labels["nvidia.com/mig.strategy"] == "mixed"
    # single: gpu.count counts MIG devices, so the node's GPUs cannot be told from the labels
    result = gpu(
        run_cli,
        cluster,
        "mig",
        "validate",
        "-f",
        MIG_CONFIGS,
        "-c",
        "all-1g.10gb",
        "--node",
        "single",
    )
    assert result.exit_code == 1
    assert "runs the device plugin with migStrategy single" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    # mixed: the full GPU's product and count stay, so the node validates
    result = gpu(
        run_cli,
        cluster,
        "mig",
        "validate",
        "-f",
        MIG_CONFIGS,
        "-c",
        "all-1g.10gb",
        "--node",
        "mixed",
    )
    assert result.exit_code == 0, result.stderr
    assert "H100-80GB" in result.stdout and "fits" in result.stdout


def test_install_places_its_pods_on_nodes_gfd_labelled(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-1", "L4", 1)], "helm", node_networks=True)
    labelled(cluster, "gpu-1", "nvidia.com/gpu.count", "1")
    # NFD's and the operator's labels gone: GFD's gpu.count alone still places our pods
    gone = {"feature.node.kubernetes.io/pci-10de.present": None, "nvidia.com/gpu.present": None}
    cluster.client.patch("nodes", "gpu-1", {"metadata": {"labels": gone}})
    result = gpu(run_cli, cluster, "install", "--dry-run")
    assert "would not run on" not in result.stderr, result.stderr
    assert "no node carries a GPU label" not in result.stderr, result.stderr


def test_share_relabels_the_node_through_nvidias_gfd(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster(
        [NodeSpec("gpu-1", "H100-SXM5-80GB", 2)], "helm", configs={"any": "version: v1\n"},
        default_config="any", node_networks=True,
    )  # fmt: skip
    labelled(cluster, "gpu-1", PRODUCT, "NVIDIA-H100-80GB-HBM3")
    assert eventually(lambda: cluster.allocatable("gpu-1") == 2, 60)
    result = gpu(run_cli, cluster, "share", "--replicas", "4", "--wait", "--timeout", "60s")
    assert result.exit_code == 0, result.stderr
    labels = labelled(cluster, "gpu-1", PRODUCT, "NVIDIA-H100-80GB-HBM3-SHARED")
    assert (labels["nvidia.com/gpu.replicas"], labels["nvidia.com/gpu.sharing-strategy"]) == (
        "4",
        "time-slicing",
    )


def test_the_mig_managers_change_reaches_the_labels_nvidias_gfd_writes(
    run_cli: Run, sim_cluster: MakeSimCluster, tmp_path: Path
) -> None:
    cluster = sim_cluster(
        [NodeSpec("gpu-1", "A100-SXM4-80GB", 2)], layouts.gpu_operator(mig_strategy="mixed"),
        controllers=WITH_MIG_MANAGER, node_networks=True,
    )  # fmt: skip
    labelled(cluster, "gpu-1", PRODUCT, "NVIDIA-A100-SXM4-80GB")
    config = tmp_path / "mig.yaml"
    two = [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]
    config.write_text(yaml.safe_dump({"version": "v1", "mig-configs": {"all-3g": two}}))
    result = gpu(run_cli, cluster, "mig", "apply", "-f", str(config), "-c", "all-3g",
                 "--node", "gpu-1", "--wait", "--timeout", "60s")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    labels = labelled(cluster, "gpu-1", "nvidia.com/mig-3g.40gb.count", "4")
    assert labels["nvidia.com/mig-3g.40gb.product"] == "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb"
    assert labels["nvidia.com/mig.strategy"] == "mixed"
