"""A config that selects some of a node's GPUs (`devices: [0]`): the agent changes and verifies
those and leaves the others alone; a config that selects no GPU the node has fails, as the
CLI's `not-covered` says; a `mig.state` label set by hand without a request is corrected."""

from __future__ import annotations

import json

from kubectl_gpu import keys
from kubectl_gpu.mig.apply import Start
from tests.agent.fixtures import Agent, ask, labels, notes, store_config, store_text
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import layouts


def _store_devices(cluster: object, name: str, devices: list[int]) -> None:
    doc = {
        "version": "v1",
        "mig-configs": {
            name: [{"devices": devices, "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]
        },
    }
    store_text(cluster, name, json.dumps(doc))  # type: ignore[arg-type]


def test_a_config_for_gpu_0_succeeds_and_leaves_gpu_1_whole(
    sim_cluster: MakeSimCluster, agent: Agent
) -> None:
    cluster = sim_cluster(["gpu-1=H100-SXM5-80GB:2"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    _store_devices(cluster, "first", [0])
    ask(cluster, "gpu-1", "first")

    assert agent(cluster, "gpu-1", timeout=2.0) is Start.CONFIGURE

    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "success", notes(cluster, "gpu-1")
    assert cluster.allocatable("gpu-1", "nvidia.com/mig-3g.40gb") == 2
    assert cluster.allocatable("gpu-1", "nvidia.com/gpu") == 1  # GPU 1, untouched


def test_a_config_for_gpu_0_leaves_gpu_1_partitioned_as_it_was_and_succeeds(
    sim_cluster: MakeSimCluster, agent: Agent
) -> None:
    cluster = sim_cluster(["gpu-1=H100-SXM5-80GB:2"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    store_config(cluster, "sevens", {"1g.10gb": 7})
    ask(cluster, "gpu-1", "sevens")
    agent(cluster, "gpu-1", timeout=2.0)
    _store_devices(cluster, "first", [0])
    ask(cluster, "gpu-1", "first")

    agent(cluster, "gpu-1", timeout=2.0)

    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "success", notes(cluster, "gpu-1")
    assert cluster.allocatable("gpu-1", "nvidia.com/mig-3g.40gb") == 2
    assert cluster.allocatable("gpu-1", "nvidia.com/mig-1g.10gb") == 7  # GPU 1, untouched


def test_a_config_for_a_gpu_the_node_lacks_fails_and_says_so(
    sim_cluster: MakeSimCluster, agent: Agent
) -> None:
    cluster = sim_cluster(["gpu-1=H100-SXM5-80GB:2"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    _store_devices(cluster, "eighth", [7])
    ask(cluster, "gpu-1", "eighth")

    agent(cluster, "gpu-1", timeout=2.0)

    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "failed"
    assert "GPU 7" in notes(cluster, "gpu-1")[keys.MIG_REASON_ANNOTATION]
    assert not [c for c in cluster.nvml("gpu-1").calls if "Create" in c or "SetMigMode" in c]


def _operator_without_mig_manager(sim_cluster: MakeSimCluster) -> object:
    controllers = ("kubelet", "gfd", "gpu-operator")
    cluster = sim_cluster(
        ["gpu-1=H100-SXM5-80GB:1"], layouts.gpu_operator(mig_strategy="mixed"),
        controllers=controllers,
    )  # fmt: skip
    cluster.client.patch(
        "clusterpolicies", "cluster-policy", {"spec": {"migManager": {"enabled": False}}}
    )
    cluster.settle()
    return cluster


def test_a_paused_plugin_note_outside_a_change_does_not_switch_the_plugin_off(
    sim_cluster: MakeSimCluster, agent: Agent
) -> None:
    cluster = _operator_without_mig_manager(sim_cluster)
    body = {"metadata": {"annotations": {keys.MIG_PAUSED_PLUGIN_ANNOTATION: "false"}}}
    cluster.client.patch("nodes", "gpu-1", body)  # type: ignore[attr-defined]

    agent(cluster, "gpu-1")

    assert labels(cluster, "gpu-1")[keys.DEPLOY_DEVICE_PLUGIN_LABEL] == "true"
    assert cluster.plugin_pod("gpu-1") is not None  # type: ignore[attr-defined]


def test_a_state_label_set_by_hand_without_a_request_is_corrected(
    sim_cluster: MakeSimCluster, agent: Agent
) -> None:
    cluster = sim_cluster(["gpu-1=H100-SXM5-80GB:1"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    for hand_set in ("success", "pending", "failed"):
        body = {"metadata": {"labels": {keys.MIG_STATE_LABEL: hand_set}}}
        cluster.client.patch("nodes", "gpu-1", body)

        assert agent(cluster, "gpu-1") is Start.NOTHING

        assert keys.MIG_STATE_LABEL not in labels(cluster, "gpu-1")
        assert keys.MIG_REASON_ANNOTATION not in notes(cluster, "gpu-1")
