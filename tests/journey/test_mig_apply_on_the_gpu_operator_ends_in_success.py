"""`kubectl gpu mig apply --wait` on the GPU Operator layout, through the real kubectl: the
operator's MIG manager (its stand-in acts on `nvidia.com/mig.config` as NVIDIA's does: reads
the operator's mig-parted ConfigMap, applies the config to the node's GPUs, restarts the
device plugin, sets `nvidia.com/mig.config.state` pending → success) ends the change in
`success`, and the node's capacity follows (and back).

On the real control plane: the real DaemonSet controller places the operator's MIG manager and
device plugin pods, KWOK runs them, and the plugin pod the MIG manager deletes is replaced by
the real controller."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubectl_gpu import keys
from tests.conftest import eventually
from tests.journey.fixtures import Kubectl
from tests.kit.cluster import SimCluster
from tests.kit.cluster.cluster import WITH_MIG_MANAGER
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import layouts

pytestmark = pytest.mark.kubectl
CONFIGS = {
    "all-3g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}],
    "all-disabled": [{"devices": "all", "mig-enabled": False}],
}


def test_the_operators_mig_manager_takes_the_change_to_success(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl], tmp_path: Path
) -> None:
    layout = layouts.gpu_operator(mig_strategy="mixed")
    cluster = sim_cluster(["gpu-1=A100-SXM4-80GB:2"], layout, controllers=WITH_MIG_MANAGER)
    cluster.settle()
    k = kubectl(cluster)
    config = tmp_path / "mig.yaml"
    config.write_text(yaml.safe_dump({"version": "v1", "mig-configs": CONFIGS}))
    states: list[str] = []

    def record(kind: str, key: object, obj: dict[str, Any]) -> None:
        if obj.get("kind") == "Node":
            states.append(obj["metadata"].get("labels", {}).get(keys.MIG_CONFIG_STATE_LABEL, ""))

    cluster.store.subscribe(record)

    applied = k("gpu", "mig", "apply", "-f", str(config), "-c", "all-3g", "--node", "gpu-1",
                "--wait", "--timeout", "60s", "-o", "json")  # fmt: skip

    assert applied.returncode == 0, applied.stderr
    [row] = json.loads(applied.stdout)["nodes"]
    assert (row["actuator"], row["result"]) == ("gpu-operator", "success")
    # the CLI read `success` from the API server; the store's subscribers hear of it a moment
    # later (a CI run saw ['', 'pending'] here)
    assert eventually(lambda: "pending" in states and states[-1] == "success", 10), states
    assert all(g.mig_enabled for g in cluster.node_gpus("gpu-1"))
    cluster.settle()
    assert cluster.allocatable("gpu-1", "nvidia.com/mig-3g.40gb") == 4
    status = json.loads(k("gpu", "mig", "status", "-o", "json").stdout)["nodes"][0]
    assert (status["desired"], status["state"]) == ("all-3g", "success")

    back = k("gpu", "mig", "apply", "-f", str(config), "-c", "all-disabled", "--node", "gpu-1",
             "--wait", "--timeout", "60s")  # fmt: skip
    assert back.returncode == 0, back.stderr
    cluster.settle()
    assert cluster.allocatable("gpu-1") == 2
