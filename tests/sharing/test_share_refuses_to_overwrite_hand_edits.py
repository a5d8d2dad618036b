"""`share` and `share off` compare, before writing, each node label and the ClusterPolicy config
they would write over with what the rollback history says kubectl gpu last wrote there (the
comparison `share rollback` makes). An edit made since is refused unless forced; an edit the
change leaves alone, a value an interrupted change never wrote, and a history that cannot be
read are no reason to refuse."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from kubectl_gpu.sharing import rollout
from kubectl_gpu.sharing.rollout import ShareRefused, ShareRequest
from tests.workflows.sharebuilders import gpu_node, helm, operator, state, ts

PLAIN = "version: v1\n"
LABEL = "nvidia.com/device-plugin.config"


def written(before: rollout.ClusterState, plan: rollout.Plan) -> rollout.ClusterState:
    """The state once `plan` was written in full, its record pushed onto the history."""
    texts = {**before.configmap.texts}
    texts.update({c.key: yaml.safe_dump(c.doc, sort_keys=False) for c in plan.keys})
    record = dataclasses.replace(plan.record, written={c.key: texts[c.key] for c in plan.keys})
    history = rollout.push(before.configmap.record, record, "cm").text or ""
    labels = {c.node: c.after for c in plan.labels}
    nodes = [gpu_node(n.name, 2, label=labels.get(n.name, n.config_label)) for n in before.nodes]
    policy = plan.policy.after if plan.policy is not None else before.deployment.policy_config
    deployment = before.deployment
    if deployment.kind == "gpu-operator" and policy is not None:
        deployment = operator(configmap=policy[0], default=policy[1])
    return state(deployment, texts, nodes, history)


def relabelled(cluster: rollout.ClusterState, node: str, label: str) -> rollout.ClusterState:
    nodes = [
        gpu_node(n.name, 2, label=label if n.name == node else n.config_label)
        for n in cluster.nodes
    ]
    configmap = cluster.configmap
    return state(cluster.deployment, configmap.texts, nodes, configmap.record)


def two_changes() -> rollout.ClusterState:
    """`share --node a`, then `share --node b`: node a's label was written by the older one."""
    cluster = state(helm(), {"any": PLAIN, "mine": ts(3)}, [gpu_node("a", 2), gpu_node("b", 2)])
    cluster = written(cluster, rollout.make(cluster, ShareRequest(replicas=2, nodes=("a",))))
    return written(cluster, rollout.make(cluster, ShareRequest(replicas=4, nodes=("b",))))


def test_an_edit_of_what_an_older_change_wrote_is_refused() -> None:
    edited = relabelled(two_changes(), "a", "mine")

    with pytest.raises(ShareRefused) as caught:
        rollout.make(edited, ShareRequest(replicas=8, nodes=("a",)))

    assert "the nvidia.com/device-plugin.config label of node(s) a changed since" in str(
        caught.value
    )
    assert caught.value.details == (
        f"node a: {LABEL}=kubectl-gpu-ts-2 last written by kubectl gpu, now mine",
    )
    assert "--force" in caught.value.hint and "--node a --key mine" in caught.value.hint
    with pytest.raises(ShareRefused):
        rollout.make(edited, ShareRequest(replicas=None, nodes=("a",)))  # share off alike


def test_force_goes_on_and_the_plan_names_what_it_overwrites() -> None:
    edited = relabelled(two_changes(), "a", "mine")

    plan = rollout.make(edited, ShareRequest(replicas=8, nodes=("a",)), force=True)

    assert [(c.node, c.before, c.after) for c in plan.labels] == [("a", "mine", "kubectl-gpu-ts-8")]
    assert plan.overwrites == (
        f"node a: {LABEL}=kubectl-gpu-ts-2 last written by kubectl gpu, now mine",
    )


def test_an_edited_node_the_change_leaves_alone_is_no_reason_to_refuse() -> None:
    edited = relabelled(two_changes(), "a", "mine")

    plan = rollout.make(edited, ShareRequest(replicas=8, nodes=("b",)))

    assert [c.node for c in plan.labels] == ["b"] and not plan.overwrites


def test_a_label_an_interrupted_change_never_wrote_is_no_edit() -> None:
    before = state(helm(), {"any": PLAIN}, [gpu_node("a", 2)])
    plan = rollout.make(before, ShareRequest(replicas=2, nodes=("a",)))
    done = written(before, plan)
    # the ConfigMap and its record were written, then the run stopped before the label
    interrupted = state(helm(), done.configmap.texts, [gpu_node("a", 2)], done.configmap.record)

    again = rollout.make(interrupted, ShareRequest(replicas=2, nodes=("a",)))

    assert [(c.node, c.after) for c in again.labels] == [("a", "kubectl-gpu-ts-2")]


def test_an_unreadable_history_blocks_nothing() -> None:
    cluster = state(helm(), {"any": PLAIN}, [gpu_node("a", 2, label="any")], "{not json")

    plan = rollout.make(cluster, ShareRequest(replicas=2, nodes=("a",)))

    assert [c.node for c in plan.labels] == ["a"]


def operator_shared() -> rollout.ClusterState:
    """`share` on the operator's default install set the ClusterPolicy's config; then someone
    pointed its default at a key of their own."""
    before = state(operator(configured=False), {}, [gpu_node("a", 2)])
    done = written(before, rollout.make(before, ShareRequest(replicas=2)))
    assert done.deployment.policy_config == ("time-slicing-config", "default")
    texts = {**done.configmap.texts, "mine": PLAIN}
    return state(operator(default="mine"), texts, [gpu_node("a", 2)], done.configmap.record)


def test_a_change_that_builds_on_an_edited_cluster_policy_goes_on() -> None:
    plan = rollout.make(operator_shared(), ShareRequest(replicas=4))

    assert plan.policy is None and [c.key for c in plan.keys] == ["mine"]


def test_a_change_that_would_repoint_an_edited_cluster_policy_is_refused() -> None:
    with pytest.raises(ShareRefused) as caught:
        rollout.make(operator_shared(), ShareRequest(replicas=4, key="default"))

    assert caught.value.details == (
        "ClusterPolicy cluster-policy spec.devicePlugin.config: {name: time-slicing-config, "
        "default: default} last written by kubectl gpu, now {name: time-slicing-config, "
        "default: mine}",
    )
    assert "drop --key/--configmap, so the change edits key mine" in caught.value.hint
