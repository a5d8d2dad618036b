"""The rollback record: what a change replaced, kept with it, restored by `share rollback`."""

from __future__ import annotations

import pytest

from kubectl_gpu import errors
from kubectl_gpu.sharing import rollout
from kubectl_gpu.sharing.rollout import Record, ShareRequest
from tests.workflows.sharebuilders import gpu_node, helm, operator, state, ts

PLAIN = "version: v1\n"


def test_a_record_survives_its_annotation_form() -> None:
    record = Record(
        "nvidia.com/gpu",
        {"any": PLAIN, "new": None},
        {"a": None, "b": "old"},
        True,
        ("time-slicing-config", "any"),
    )
    assert rollout.decode(record.encode(), "cm") == record
    unchanged = Record("nvidia.com/gpu", {}, {})
    assert rollout.decode(unchanged.encode(), "cm") == unchanged


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "[]",
        '{"version": 2}',
        '{"version": 1, "resource": "x"}',
        '{"version":1,"resource":"x","keys":{"a":3},"labels":{}}',
    ],
)
def test_a_damaged_record_is_a_config_error(text: str) -> None:
    with pytest.raises(errors.ConfigError, match="rollback record on cm cannot be read"):
        rollout.decode(text, "cm")


def test_the_record_holds_previous_texts_labels_and_policy() -> None:
    cluster = state(operator(default=""), {"x": ts(2)}, [gpu_node("a", 2)])
    plan = rollout.make(cluster, ShareRequest(replicas=4))
    assert plan.record.keys == {"default": None}
    assert plan.record.policy_changed and plan.record.policy == ("time-slicing-config", "")


def rolled_back(before: rollout.ClusterState, plan: rollout.Plan) -> rollout.ClusterState:
    """The state after `plan` was written (as the workflow would write it)."""
    texts = {**before.configmap.texts, **{c.key: ts_text(c) for c in plan.keys}}
    nodes = []
    for node in before.nodes:
        label = next((c.after for c in plan.labels if c.node == node.name), node.config_label)
        nodes.append(gpu_node(node.name, node.physical("nvidia.com/gpu") or 1, label=label))
    return state(before.deployment, texts, nodes, plan.record.encode())


def ts_text(change: rollout.KeyChange) -> str:
    import yaml

    return change.text if change.text is not None else yaml.safe_dump(change.doc, sort_keys=False)


def test_rollback_restores_texts_and_labels_and_keeps_added_keys() -> None:
    import yaml

    before = state(
        helm(), {"any": PLAIN, "old": ts(2)}, [gpu_node("a", 2, label="old"), gpu_node("b", 2)]
    )
    plan = rollout.make(before, ShareRequest(replicas=4))  # cluster-wide: edits "any"
    per_node = rollout.make(rolled_back(before, plan), ShareRequest(replicas=8, nodes=("a",)))
    after = rolled_back(rolled_back(before, plan), per_node)
    record = rollout.decode(after.configmap.record, "cm")
    restored = {k: yaml.safe_load(t) for k, t in record.keys.items() if t is not None}
    undo = rollout.rollback(after, record, restored)
    assert {c.node: c.after for c in undo.labels} == {"a": "old"}
    assert undo.keys == ()  # the per-node change added a key and wrote nothing else
    assert any("kubectl-gpu-ts-8 was added by that change; it stays" in n for n in undo.notes)
    assert [n.node for n in undo.restarts] == ["a"]


def test_rollback_of_a_content_change_puts_the_old_text_back_verbatim() -> None:
    import yaml

    commented = "# tuned by team A\nversion: v1\n"
    before = state(helm(), {"any": commented}, [gpu_node("a", 2)])
    plan = rollout.make(before, ShareRequest(replicas=3))
    after = rolled_back(before, plan)
    record = rollout.decode(after.configmap.record, "cm")
    undo = rollout.rollback(after, record, {"any": yaml.safe_load(commented)})
    [change] = undo.keys
    assert change.text == commented and change.before == ts_text(plan.keys[0])
    assert undo.record.keys == {"any": change.before}  # rolling back again redoes the change
    assert (undo.nodes[0].before, undo.nodes[0].expected) == (2, 2)


def test_rollback_restores_the_cluster_policy() -> None:
    import yaml

    before = state(
        operator(configured=False, configmap="device-plugin-config"), None, [gpu_node("a", 1)]
    )
    plan = rollout.make(before, ShareRequest(replicas=3))
    assert plan.policy is not None
    after = state(
        operator(configmap="device-plugin-config", default="default"),
        {"default": ts_text(plan.keys[0])},
        [gpu_node("a", 1, replicas=3)],
        plan.record.encode(),
    )
    record = rollout.decode(after.configmap.record, "cm")
    undo = rollout.rollback(after, record, {})
    assert undo.policy is not None and undo.policy.after is None
    assert undo.policy.patch() == {"spec": {"devicePlugin": {"config": None}}}
    assert (undo.nodes[0].before, undo.nodes[0].expected, undo.nodes[0].key) == (3, 1, "")
    assert (
        yaml.safe_load(ts_text(plan.keys[0]))["sharing"]["timeSlicing"]["resources"][0]["replicas"]
        == 3
    )
