"""Planning a cluster-wide change: the default key, the nodes it reaches, what they become."""

from __future__ import annotations

import pytest
import yaml

from kubectl_gpu import keys
from kubectl_gpu.sharing import rollout
from kubectl_gpu.sharing.rollout import ShareRefused, ShareRequest
from tests.workflows.sharebuilders import gpu_node, helm, operator, state, ts

PLAIN = "version: v1\nflags:\n  migStrategy: none\n"


def by_node(plan: rollout.Plan) -> dict[str, rollout.NodePlan]:
    return {n.node: n for n in plan.nodes}


def test_replicas_4_on_8_and_4_gpus_expects_32_and_16() -> None:
    cluster = state(helm(), {"any": PLAIN}, [gpu_node("a", 8), gpu_node("b", 4)])
    plan = rollout.make(cluster, ShareRequest(replicas=4))
    [change] = plan.keys
    assert change.key == "any" and change.before == PLAIN
    assert change.doc == {
        "version": "v1",
        "flags": {"migStrategy": "none"},  # kept from the key being edited
        "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}},
    }
    nodes = by_node(plan)
    assert {n: (p.gpus, p.before, p.expected, p.restart) for n, p in nodes.items()} == {
        "a": (8, 8, 32, True),
        "b": (4, 4, 16, True),
    }
    assert nodes["a"].strategy == "time-slicing" and nodes["a"].reason == "key any changes"
    assert plan.labels == () and plan.policy is None


def test_nothing_to_write_and_nothing_to_restart_when_already_done() -> None:
    cluster = state(helm(), {"any": ts(4)}, [gpu_node("a", 8, replicas=4)])
    plan = rollout.make(cluster, ShareRequest(replicas=4))
    assert not plan.writes and plan.restarts == ()
    assert [(n.node, n.expected, n.reason) for n in plan.nodes] == [("a", 32, "already as wanted")]


def test_a_plugin_still_running_an_older_config_is_restarted_without_writing() -> None:
    # The ConfigMap already says 4, but the plugin never reloaded it (content edits do not reload).
    node = gpu_node("a", 8, replicas=1, extra={"nvidia.com/gpu.replicas": "1"})
    plan = rollout.make(state(helm(), {"any": ts(4)}, [node]), ShareRequest(replicas=4))
    assert not plan.writes
    [restart] = plan.restarts
    assert restart.expected == 32 and "older" in restart.reason


def test_physical_gpus_come_from_allocatable_when_gfd_did_not_count_them() -> None:
    node = gpu_node("a", 8, replicas=2, counted=False)
    plan = rollout.make(state(helm(), {"any": ts(2)}, [node]), ShareRequest(replicas=3))
    assert (plan.nodes[0].gpus, plan.nodes[0].before, plan.nodes[0].expected) == (8, 16, 24)


def test_renaming_expects_the_shared_resource_name() -> None:
    cluster = state(helm(), {"any": PLAIN}, [gpu_node("a", 2)])
    plan = rollout.make(cluster, ShareRequest(replicas=2, rename_by_default=True))
    # before: 2 under the name advertised then (nvidia.com/gpu); after: 4 under the new one
    assert (plan.nodes[0].resource, plan.nodes[0].before, plan.nodes[0].expected) == (
        "nvidia.com/gpu.shared",
        2,
        4,
    )


def test_nodes_labelled_with_another_key_keep_it_and_are_told_about() -> None:
    nodes = [gpu_node("a", 8), gpu_node("b", 4, replicas=2, label="ts-2")]
    plan = rollout.make(
        state(helm(), {"any": PLAIN, "ts-2": ts(2)}, nodes), ShareRequest(replicas=4)
    )
    assert [n.node for n in plan.nodes] == ["a"]
    assert any("node b reads key ts-2 and keeps it" in note for note in plan.notes)


def test_operator_without_a_config_gets_a_configmap_and_a_default_key() -> None:
    cluster = state(
        operator(configured=False, configmap="device-plugin-config"), None, [gpu_node("a", 1)]
    )
    plan = rollout.make(cluster, ShareRequest(replicas=3))
    assert plan.create and [c.key for c in plan.keys] == [keys.DEFAULT_CONFIG_KEY]
    assert plan.policy is not None
    assert (plan.policy.before, plan.policy.after) == (None, ("device-plugin-config", "default"))
    assert plan.policy.patch() == {
        "spec": {"devicePlugin": {"config": {"name": "device-plugin-config", "default": "default"}}}
    }
    assert (plan.nodes[0].before, plan.nodes[0].expected) == (1, 3)


def test_operator_with_a_config_but_no_default_key_gets_one() -> None:
    cluster = state(operator(default=""), {"other": ts(2)}, [gpu_node("a", 2)])
    plan = rollout.make(cluster, ShareRequest(replicas=4))
    assert [c.key for c in plan.keys] == ["default"]
    assert plan.policy is not None and plan.policy.after == ("time-slicing-config", "default")
    # starts from the empty config unlabelled nodes read, not from key "other"
    assert plan.keys[0].doc == yaml.safe_load(ts(4))


def test_helm_default_from_the_named_fallback() -> None:
    cluster = state(helm(default=""), {"default": PLAIN, "x": ts(2)}, [gpu_node("a", 2)])
    plan = rollout.make(cluster, ShareRequest(replicas=2))
    assert [c.key for c in plan.keys] == ["default"]


def test_a_key_no_node_reads_is_refused() -> None:
    cluster = state(helm(), {"any": PLAIN}, [gpu_node("a", 2)])
    with pytest.raises(ShareRefused, match="no GPU node reads key 'unused'"):
        rollout.make(cluster, ShareRequest(replicas=2, key="unused"))


def test_turning_sharing_off_removes_the_block_instead_of_replicas_1() -> None:
    cluster = state(helm(), {"any": ts(4, migStrategy="none")}, [gpu_node("a", 2, replicas=4)])
    plan = rollout.make(cluster, ShareRequest(replicas=None))
    assert plan.keys[0].doc == {"version": "v1", "flags": {"migStrategy": "none"}}
    assert (plan.nodes[0].before, plan.nodes[0].expected, plan.nodes[0].strategy) == (8, 2, "none")


def test_turning_off_what_was_never_on_writes_nothing() -> None:
    cluster = state(operator(configured=False), None, [gpu_node("a", 2)])
    plan = rollout.make(cluster, ShareRequest(replicas=None))
    assert not plan.writes and plan.policy is None
    assert [(n.node, n.expected, n.restart) for n in plan.nodes] == [("a", 2, False)]
