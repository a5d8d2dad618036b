"""The agent asks the GPU's own driver whether it offers every instance a config needs before
it changes anything, MIG mode off included: a real driver answers then (tests/data/nvml).

Before, the driver was asked only on GPUs whose MIG mode was already on, so a profile the
offline geometry knows but this driver does not offer was found only after the plugin was
paused and MIG mode switched on: the node was left changed by a config it could not apply.
"""

from __future__ import annotations

from kubectl_gpu import keys
from tests.agent.fixtures import Agent, ask, labels, notes, store_config
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import layouts


def test_a_profile_the_driver_does_not_offer_is_refused_before_mig_mode_changes(
    sim_cluster: MakeSimCluster, agent: Agent
) -> None:
    cluster = sim_cluster(["gpu-1=H100-SXM5-80GB:1"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    gpu = cluster.nvml("gpu-1").gpu(0)
    gpu.withhold("1g.10gb")  # this driver does not offer it; the model's geometry does
    store_config(cluster, "balanced", {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1})
    ask(cluster, "gpu-1", "balanced")

    agent(cluster, "gpu-1")

    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "failed"
    reason = notes(cluster, "gpu-1")[keys.MIG_REASON_ANNOTATION]
    assert 'MIG profile "1g.10gb" not found on this GPU' in reason
    assert not gpu.mig_enabled and gpu.mig_pending == 0  # nothing was touched
    assert keys.DEPLOY_DEVICE_PLUGIN_LABEL not in labels(cluster, "gpu-1")  # never paused
    assert cluster.allocatable("gpu-1", "nvidia.com/gpu") == 1


def test_a_config_the_driver_offers_still_applies_from_mig_mode_off(
    sim_cluster: MakeSimCluster, agent: Agent
) -> None:
    cluster = sim_cluster(["gpu-1=H100-SXM5-80GB:1"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    cluster.nvml("gpu-1").gpu(0).withhold("1g.20gb")  # not asked for: no reason to refuse
    store_config(cluster, "balanced", {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1})
    ask(cluster, "gpu-1", "balanced")

    agent(cluster, "gpu-1")

    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "success"
    assert cluster.allocatable("gpu-1", "nvidia.com/mig-1g.10gb") == 2
