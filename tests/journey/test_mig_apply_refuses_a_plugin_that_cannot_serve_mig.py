"""On the NVIDIA Helm chart's default (MIG strategy `none`) `mig apply` used to say `fits`,
partition the GPUs, wait out its timeout and leave them MIG-enabled while the plugin still
advertised whole GPUs. Now the strategy of the plugin serving the node is read as the plugin
reads it (env MIG_STRATEGY, else `flags.migStrategy` of the key the node selects, else
`none`) and `mig validate --node`, `mig plan --node`, the dry run and the real run give one
verdict, refused before anything is written. Through the real kubectl."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from kubectl_gpu import keys
from tests.agent.fixtures import agent_pod
from tests.journey.fixtures import Kubectl
from tests.kit.cluster import SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import layouts

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(120)]
CONFIGS = {
    "all-3g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}],
    "balanced": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 1, "2g.20gb": 1}}
    ],
    "all-disabled": [{"devices": "all", "mig-enabled": False}],
}


def config_file(tmp_path: Path) -> str:
    path = tmp_path / "mig.yaml"
    path.write_text(yaml.safe_dump({"version": "v1", "mig-configs": CONFIGS}))
    return str(path)


def nothing_written(cluster: SimCluster) -> None:
    labels = cluster.client.get("nodes", "gpu-1")["metadata"].get("labels") or {}
    assert keys.MIG_DESIRED_LABEL not in labels and keys.MIG_CONFIG_LABEL not in labels
    found = cluster.client.list("configmaps", keys.NAMESPACE)
    assert [c["metadata"]["name"] for c in found] in ([], ["kube-root-ca.crt"])  # the server's
    assert not any(g.mig_enabled for g in cluster.node_gpus("gpu-1"))


def one_verdict(k: Kubectl, config: str, name: str) -> list[str]:
    """The same question through validate, plan, the dry run and the real run: their exit
    codes, and the stderr of the real run."""
    node = ("-c", name, "--node", "gpu-1")
    runs = [
        k("gpu", "mig", "validate", "-f", config, *node),
        k("gpu", "mig", "plan", "-f", config, *node),
        k("gpu", "mig", "apply", "-f", config, *node, "--dry-run"),
        k("gpu", "mig", "apply", "-f", config, *node, "--dry-run=server"),
        k("gpu", "mig", "apply", "-f", config, *node, "--wait", "--timeout", "5m"),
    ]
    codes = {r.returncode for r in runs}
    assert len(codes) == 1, [(r.args[1:4], r.returncode, r.stderr) for r in runs]
    return [str(codes.pop()), runs[-1].stdout + runs[-1].stderr]


def test_the_helm_charts_default_strategy_none_is_refused_before_anything_is_written(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl], tmp_path: Path
) -> None:
    cluster = sim_cluster(["gpu-1=A100-SXM4-80GB:2"], layouts.helm())
    k = kubectl(cluster)

    code, said = one_verdict(k, config_file(tmp_path), "all-3g")

    assert code == "1"
    assert "migStrategy none" in said
    assert "env MIG_STRATEGY" in said or "the plugin's default" in said
    assert "--set migStrategy=mixed" in said  # how to change it, for this deployment
    nothing_written(cluster)
    # turning MIG off needs no MIG strategy
    off = k("gpu", "mig", "validate", "-f", config_file(tmp_path), "-c", "all-disabled",
            "--node", "gpu-1")  # fmt: skip
    assert off.returncode == 0, off.stderr


def test_the_strategy_in_the_key_the_node_selects_is_what_counts(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl], tmp_path: Path
) -> None:
    configs = {"default": "version: v1\nflags:\n  migStrategy: single\n"}
    cluster = sim_cluster(["gpu-1=A100-SXM4-80GB:2"], layouts.helm(configs, "default"))
    agent_pod(cluster, "gpu-1")
    k = kubectl(cluster)
    config = config_file(tmp_path)

    code, said = one_verdict(k, config, "balanced")  # two MIG device types: single refuses

    assert code == "1"
    assert "more than one MIG device type" in said
    assert "flags.migStrategy=single in key 'default'" in said
    nothing_written(cluster)
    fits = k("gpu", "mig", "apply", "-f", config, "-c", "all-3g", "--node", "gpu-1",
             "--dry-run", "-o", "json")  # fmt: skip
    assert fits.returncode == 0, fits.stderr


def test_the_gpu_operators_cluster_policy_strategy_is_read(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl], tmp_path: Path
) -> None:
    cluster = sim_cluster(["gpu-1=A100-SXM4-80GB:2"], layouts.gpu_operator(mig_strategy="none"))
    cluster.settle()
    k = kubectl(cluster)

    code, said = one_verdict(k, config_file(tmp_path), "all-3g")

    assert code == "1"
    assert "migStrategy none" in said and "clusterpolicies.nvidia.com cluster-policy" in said
    nothing_written(cluster)


def test_who_may_not_read_the_plugin_gets_gfds_view_of_the_strategy(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl], tmp_path: Path
) -> None:
    layout = layouts.helm(env={"MIG_STRATEGY": "single"})
    cluster = sim_cluster(["gpu-1=A100-SXM4-80GB:2"], layout)
    cluster.deny("list", "daemonsets", "apps")
    k = kubectl(cluster)

    checked = k("gpu", "mig", "validate", "-f", config_file(tmp_path), "-c", "balanced",
                "--node", "gpu-1")  # fmt: skip

    assert checked.returncode == 1, checked.stderr  # GFD's nvidia.com/mig.strategy=single
    assert "migStrategy single: GFD's nvidia.com/mig.strategy label" in checked.stderr
