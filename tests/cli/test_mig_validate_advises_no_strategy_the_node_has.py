"""`mig validate --node` names the MIG strategy of the device plugin serving each node and
how to change it; where that strategy is `mixed` already, it used to advise setting `mixed`.
Now only a node whose plugin runs another strategy gets the advice. On the real control
plane, the strategy read from the Helm chart's ConfigMap keys."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kubectl_gpu import keys
from tests.conftest import EXAMPLES, CliResult
from tests.kit.cluster import NodeSpec
from tests.kit.cluster.fixture import MakeSimCluster

MIXED = "version: v1\nflags:\n  migStrategy: mixed\n"
NONE = "version: v1\nflags:\n  migStrategy: none\n"


def test_only_another_strategy_gets_advice(
    run_cli: Callable[..., CliResult], sim_cluster: MakeSimCluster, tmp_path: Path
) -> None:
    plain = {keys.DEVICE_PLUGIN_CONFIG_LABEL: "plain"}
    nodes = [
        NodeSpec("gpu-a", "A100-SXM4-40GB", 1),
        NodeSpec("gpu-b", "A100-SXM4-40GB", 1, labels=plain),
    ]
    cluster = sim_cluster(nodes, "helm", {"mixed": MIXED, "plain": NONE}, "mixed")
    config = EXAMPLES / "mig" / "valid" / "dgx-a100-layouts.yaml"

    result = run_cli(
        "--kubeconfig", str(cluster.kubeconfig), "mig", "validate", "-f", str(config),
        "-c", "all-balanced", "--node", "gpu-a", "--node", "gpu-b",
    )  # fmt: skip

    said = {
        line.split(":")[0]: line for line in result.stderr.splitlines() if "device plugin (" in line
    }
    assert "(migStrategy mixed: " in said["node gpu-a"]
    assert "to change it" not in said["node gpu-a"]
    assert "(migStrategy none: " in said["node gpu-b"]
    assert "to change it: set flags.migStrategy: mixed in that key" in said["node gpu-b"]
