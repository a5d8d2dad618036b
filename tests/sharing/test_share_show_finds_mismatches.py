"""`share show`'s survey: what each node reads and every mismatch a user would trip over."""

from __future__ import annotations

import dataclasses
from typing import Any

from kubectl_gpu.sharing import rollout
from kubectl_gpu.sharing.rollout import PluginPod
from tests.workflows.sharebuilders import gpu_node, helm, operator, state, ts

RUNNING = PluginPod("plugin-a", "Running", True, 0)


def pod(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "plugin-x", "uid": "u1"}, "status": status}


def survey(
    cluster: rollout.ClusterState,
    pods: dict[str, PluginPod] | None = None,
    used: dict[str, dict[str, int]] | None = None,
) -> dict[str, rollout.NodeStatus]:
    found = rollout.survey(
        cluster,
        pods if pods is not None else {"a": RUNNING, "b": RUNNING},
        used or {},
        "nvidia.com/gpu",
    )
    return {row.node: row for row in found}


def test_a_healthy_shared_node_is_explained_without_problems() -> None:
    cluster = state(helm(), {"any": ts(3)}, [gpu_node("a", 1, replicas=3)])
    row = survey(cluster, used={"a": {"nvidia.com/gpu": 3}})["a"]
    assert (row.key, row.selected_by, row.strategy, row.replicas, row.gpus) == (
        "any",
        "default",
        "time-slicing",
        3,
        1,
    )
    assert (row.capacity, row.allocatable, row.in_use, row.problems) == (3, 3, 3, ())
    assert row.explain() == (
        "key any (default): 1 physical device(s) × 3 time-slicing replicas = 3 nvidia.com/gpu; "
        "advertises 3 (allocatable 3), 3 in use by pods"
    )


def test_a_label_naming_a_missing_key_is_reported() -> None:
    cluster = state(helm(), {"any": ts(2)}, [gpu_node("a", 2, label="gone")])
    [problem] = survey(cluster)["a"].problems
    assert 'config-manager fails with "specified config gone does not exist"' in problem


def test_an_env_override_that_contradicts_the_key_is_reported() -> None:
    text = "version: v1\nflags:\n  migStrategy: mixed\n"
    cluster = state(operator(MIG_STRATEGY="single"), {"any": text}, [gpu_node("a", 2)])
    [problem] = survey(cluster)["a"].problems
    assert problem == (
        "env MIG_STRATEGY=single on container nvidia-device-plugin overrides "
        "flags.migStrategy: mixed in key any"
    )


def test_capacity_that_does_not_match_the_config_is_reported() -> None:
    # The key says 4 replicas; the plugin still runs with none (content edits do not reload).
    cluster = state(helm(), {"any": ts(4)}, [gpu_node("a", 8, replicas=1)])
    [problem] = survey(cluster)["a"].problems
    assert problem.startswith("capacity 8 nvidia.com/gpu ≠ 8 physical × 4 replicas")
    assert "restart it" in problem


def test_gfd_labels_that_disagree_are_reported() -> None:
    node = gpu_node("a", 2, replicas=2, extra={"nvidia.com/gpu.replicas": "1"})
    [problem] = survey(state(helm(), {"any": ts(2)}, [node]))["a"].problems
    assert "GFD label nvidia.com/gpu.replicas=1 disagrees" in problem


def test_a_missing_or_failing_plugin_pod_is_reported() -> None:
    cluster = state(
        helm(), {"any": ts(2)}, [gpu_node("a", 2, replicas=2), gpu_node("b", 2, replicas=2)]
    )
    failing = PluginPod("plugin-b", "Running", False, 4, "CrashLoopBackOff", "back-off 40s")
    rows = survey(cluster, {"b": failing})
    assert rows["a"].plugin_status == "missing" and "no device plugin pod" in rows["a"].problems[0]
    assert rows["b"].problems == (
        "plugin pod plugin-b is CrashLoopBackOff (4 restarts): back-off 40s",
    )


def test_an_invalid_key_is_reported() -> None:
    cluster = state(helm(), {"any": "version: v2\n"}, [gpu_node("a", 2)])
    cluster = rollout.ClusterState(
        cluster.deployment,
        rollout.ConfigMapState(
            **{**cluster.configmap.__dict__, "problems": {"any": "unknown version: v2"}}
        ),
        cluster.nodes,
    )
    assert "key any is not a valid config: unknown version: v2" in survey(cluster)["a"].problems


def test_a_plugin_between_crashes_on_an_invalid_key_reads_as_a_crash_loop() -> None:
    """NVIDIA's plugin exits on a config it refuses; the kubelet shows it Running for the
    moment of each restart. Looked at then, the node must not read as serving its config."""
    cluster = state(helm(), {"any": "version: v2\n"}, [gpu_node("a", 2), gpu_node("b", 2)])
    cluster = rollout.ClusterState(
        cluster.deployment,
        rollout.ConfigMapState(
            **{**cluster.configmap.__dict__, "problems": {"any": "unknown version: v2"}}
        ),
        cluster.nodes,
    )
    restarted = {"name": "nvidia-device-plugin-ctr", "ready": True, "restartCount": 3}
    between = PluginPod.from_dict(
        pod(
            phase="Running",
            conditions=[{"type": "Ready", "status": "True"}],
            containerStatuses=[
                {
                    **restarted,
                    "state": {"running": {}},
                    "lastState": {"terminated": {"exitCode": 1}},
                }
            ],
        ),
        "nvidia-device-plugin-ctr",
    )
    restarted_cleanly = dataclasses.replace(between, last_exit_code=0)
    rows = survey(cluster, {"a": between, "b": restarted_cleanly})
    assert (rows["a"].plugin_status, rows["a"].plugin_down) == ("CrashLoopBackOff", True)
    assert (
        "plugin pod plugin-x is CrashLoopBackOff (3 restarts): its last run exited with code 1"
        in rows["a"].problems
    )
    assert (rows["b"].plugin_status, rows["b"].plugin_down) == ("Running", False)
    valid = state(helm(), {"any": ts(2)}, [gpu_node("a", 2, replicas=2)])
    assert survey(valid, {"a": between})["a"].plugin_status == "Running"  # one crash, now fine


def test_plugin_pod_health_reads_init_and_sidecar_containers() -> None:
    blocked = PluginPod.from_dict(
        pod(
            phase="Pending",
            conditions=[{"type": "Ready", "status": "False"}],
            initContainerStatuses=[
                {
                    "name": "init",
                    "restartCount": 2,
                    "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s"}},
                }
            ],
            containerStatuses=[
                {"name": "plugin", "state": {"waiting": {"reason": "PodInitializing"}}}
            ],
        ),
        "plugin",
    )
    assert blocked.crash_looping and not blocked.running
    assert (blocked.status, blocked.restarts, blocked.message) == (
        "CrashLoopBackOff",
        2,
        "container init: back-off 20s",
    )
    healthy = PluginPod.from_dict(
        pod(
            phase="Running",
            conditions=[{"type": "Ready", "status": "True"}],
            containerStatuses=[
                {"name": "plugin", "ready": True, "restartCount": 0, "state": {"running": {}}}
            ],
        ),
        "plugin",
    )
    assert healthy.running and not healthy.crash_looping and healthy.status == "Running"
