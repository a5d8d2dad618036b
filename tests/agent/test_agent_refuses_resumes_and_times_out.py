"""The agent's safety: a GPU in use is refused, a crash mid-apply resumes, a timed-out wait
ends `failed` with the device plugin back, and a mix that needs explicit placements works."""

from __future__ import annotations

from kubectl_gpu import keys
from kubectl_gpu.mig.apply import Start
from tests.agent.fixtures import Agent, ask, labels, notes, store_config
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import layouts

BALANCED = {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}


def test_a_gpu_in_use_is_refused_unless_forced(sim_cluster: MakeSimCluster, agent: Agent) -> None:
    cluster = sim_cluster(["gpu-1=H100-SXM5-80GB:1"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    cluster.nvml("gpu-1").add_process(0, 777)
    store_config(cluster, "balanced", BALANCED)
    ask(cluster, "gpu-1", "balanced")

    agent(cluster, "gpu-1")

    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "failed"
    assert "process 777" in notes(cluster, "gpu-1")[keys.MIG_REASON_ANNOTATION]
    assert not cluster.nvml("gpu-1").gpu(0).mig_enabled  # nothing was touched
    assert agent(cluster, "gpu-1") is Start.NOTHING  # no retry loop
    request = notes(cluster, "gpu-1")[keys.MIG_REQUEST_ANNOTATION]
    cluster.nvml("gpu-1").stop_process(0, 777)
    ask(cluster, "gpu-1", "balanced", **{keys.MIG_FORCE_ANNOTATION: request})
    assert agent(cluster, "gpu-1") is Start.CONFIGURE
    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "success"


def test_a_crash_mid_apply_resumes_from_desired_state(
    sim_cluster: MakeSimCluster, agent: Agent
) -> None:
    cluster = sim_cluster(["gpu-1=H100-SXM5-80GB:1"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    store_config(cluster, "balanced", BALANCED)
    ask(cluster, "gpu-1", "balanced")
    # a crashed agent left: state pending, phase configuring, half the instances made
    cluster.set_mig("gpu-1", 0, ["3g.40gb"])
    body = {
        "metadata": {
            "labels": {keys.MIG_STATE_LABEL: "pending"},
            "annotations": {keys.MIG_PHASE_ANNOTATION: "configuring"},
        }
    }
    cluster.client.patch("nodes", "gpu-1", body)

    assert agent(cluster, "gpu-1") is Start.CONFIGURE

    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "success"
    assert cluster.allocatable("gpu-1", "nvidia.com/mig-1g.10gb") == 2
    assert keys.MIG_PHASE_ANNOTATION not in notes(cluster, "gpu-1")


def test_re_applying_the_same_name_after_an_edit_applies_the_new_content(
    sim_cluster: MakeSimCluster, agent: Agent
) -> None:
    cluster = sim_cluster(["gpu-1=H100-SXM5-80GB:1"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    store_config(cluster, "mine", {"7g.80gb": 1})
    ask(cluster, "gpu-1", "mine")
    agent(cluster, "gpu-1")
    assert cluster.allocatable("gpu-1", "nvidia.com/mig-7g.80gb") == 1

    store_config(cluster, "mine", {"3g.40gb": 2})
    assert agent(cluster, "gpu-1") is Start.CONFIGURE

    assert cluster.allocatable("gpu-1", "nvidia.com/mig-3g.40gb") == 2
    assert cluster.allocatable("gpu-1", "nvidia.com/mig-7g.80gb") == 0


def test_a_mix_that_needs_placements_is_created_at_them(
    sim_cluster: MakeSimCluster, agent: Agent
) -> None:
    # 4g + 3g: created without placements, the driver's default spot for 3g blocks 4g
    # (mig-parted#29); at explicit placements both fit.
    cluster = sim_cluster(["gpu-1=H100-SXM5-80GB:1"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    store_config(cluster, "big", {"4g.40gb": 1, "3g.40gb": 1})
    ask(cluster, "gpu-1", "big")

    agent(cluster, "gpu-1")

    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "success"
    placed = {gi.profile.name: gi.placement.start for gi in _instances(cluster)}
    assert placed == {"4g.40gb": 0, "3g.40gb": 4}


def test_a_timed_out_wait_ends_failed_with_the_plugin_back_and_no_label_paused(
    sim_cluster: MakeSimCluster, agent: Agent
) -> None:
    # GPU Operator with its MIG manager off: the agent pauses the plugin by the operator's
    # label. No simulated plugin runs, so allocatable never changes and the wait times out.
    controllers = ("kubelet", "gfd", "gpu-operator")
    cluster = sim_cluster(
        ["gpu-1=H100-SXM5-80GB:1"], layouts.gpu_operator(mig_strategy="mixed"),
        controllers=controllers,
    )  # fmt: skip
    policy = {"spec": {"migManager": {"enabled": False}}}
    cluster.client.patch("clusterpolicies", "cluster-policy", policy)
    cluster.settle()
    store_config(cluster, "balanced", BALANCED)
    ask(cluster, "gpu-1", "balanced")

    agent(cluster, "gpu-1", timeout=0.5)

    node = labels(cluster, "gpu-1")
    assert node[keys.MIG_STATE_LABEL] == "failed"
    assert "timed out" in notes(cluster, "gpu-1")[keys.MIG_REASON_ANNOTATION]
    assert node[keys.DEPLOY_DEVICE_PLUGIN_LABEL] == "true"
    assert keys.MIG_PAUSED_PLUGIN_ANNOTATION not in notes(cluster, "gpu-1")
    assert cluster.plugin_pod("gpu-1") is not None


def test_the_operator_mig_manager_node_is_left_to_it(
    sim_cluster: MakeSimCluster, agent: Agent
) -> None:
    cluster = sim_cluster(["gpu-1=H100-SXM5-80GB:1"], "gpu-operator")
    store_config(cluster, "balanced", BALANCED)
    ask(cluster, "gpu-1", "balanced")

    agent(cluster, "gpu-1")

    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "failed"
    assert "GPU Operator" in notes(cluster, "gpu-1")[keys.MIG_REASON_ANNOTATION]
    assert not cluster.nvml("gpu-1").gpu(0).mig_enabled


def _instances(cluster: object) -> list[object]:
    gpu = cluster.nvml("gpu-1").gpu(0)  # type: ignore[attr-defined]
    return list(gpu.mig.gpu_instances.values())
