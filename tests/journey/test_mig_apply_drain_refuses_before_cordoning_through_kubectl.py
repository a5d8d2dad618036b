"""`mig apply --drain` on a first try, through the real kubectl: where nothing would act on the
change (no agent pod on the node) or a pod has no controller to recreate it, it refuses before
it cordons or evicts anything, naming why; with the agent there and `--force`, its dry run
names the pod it would evict and says yes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from kubectl_gpu import keys
from tests.agent.fixtures import agent_pod
from tests.cli.test_map_cluster_on_a_simulated_mig_node import mig_pod
from tests.journey.fixtures import Kubectl
from tests.kit.cluster import SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import layouts

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(120)]
ALL_3G = [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]


def untouched(cluster: SimCluster) -> None:
    node = cluster.client.get("nodes", "gpu-1")
    assert not node["spec"].get("unschedulable")  # never cordoned
    assert keys.DRAIN_ANNOTATION not in node["metadata"].get("annotations", {})
    assert keys.MIG_DESIRED_LABEL not in node["metadata"]["labels"]
    assert cluster.client.get("pods", "notebook", "default")  # never evicted


def test_a_drain_refuses_before_cordoning_what_would_go_wrong(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl], tmp_path: Path
) -> None:
    cluster = sim_cluster(["gpu-1=A100-SXM4-80GB:1"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    cluster.client.create(mig_pod("notebook", "nvidia.com/gpu"))  # a bare pod, no controller
    cluster.settle()
    k = kubectl(cluster)
    config = tmp_path / "mig.yaml"
    config.write_text(yaml.safe_dump({"version": "v1", "mig-configs": {"all-3g": ALL_3G}}))
    apply = ("gpu", "mig", "apply", "-f", str(config), "-c", "all-3g", "--node", "gpu-1")

    nobody = k(*apply, "--drain")  # no agent installed: nothing would make the change

    assert nobody.returncode == 1
    assert "no kubectl-gpu agent pod runs on gpu-1, so nothing would act on the change" in (
        nobody.stderr
    )
    assert (
        "cannot evict Pods that declare no controller (use --force to override): "
        "default/notebook" in nobody.stderr
    )
    assert "nothing was written" in nobody.stderr
    untouched(cluster)

    agent_pod(cluster, "gpu-1")
    bare = k(*apply, "--drain")
    assert bare.returncode == 1 and "declare no controller" in bare.stderr
    assert "no kubectl-gpu agent pod" not in bare.stderr
    untouched(cluster)

    forced = k(*apply, "--drain", "--force", "--dry-run", "-o", "json")
    assert forced.returncode == 0, forced.stderr
    assert json.loads(forced.stdout)["preview"]["nodes"][0]["podsHit"][0]["pod"] == (
        "default/notebook"
    )
    untouched(cluster)
