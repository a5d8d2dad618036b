"""`share rollback` used to discard, without a word, a hand edit of a node's config label or of
the ClusterPolicy's `devicePlugin.config` made after the change it undoes (only ConfigMap keys
were protected). The record now keeps what the change wrote there too; a rollback that would
throw such an edit away is refused, showing it, unless --force."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from kubectl_gpu.sharing import rollout
from kubectl_gpu.sharing.rollout import Record, ShareRefused, ShareRequest
from tests.workflows.sharebuilders import gpu_node, helm, operator, state, ts

PLAIN = "version: v1\n"


def written(
    before: rollout.ClusterState, plan: rollout.Plan, label: str | None = ""
) -> rollout.ClusterState:
    """The state once `plan` was written; `label` (when not "") is node a's label after a
    hand edit."""
    texts = {**before.configmap.texts}
    texts.update({c.key: yaml.safe_dump(c.doc, sort_keys=False) for c in plan.keys})
    record = dataclasses.replace(plan.record, written={c.key: texts[c.key] for c in plan.keys})
    nodes = []
    for node in before.nodes:
        after = next((c.after for c in plan.labels if c.node == node.name), node.config_label)
        if node.name == "a" and label != "":
            after = label
        nodes.append(gpu_node(node.name, 2, label=after))
    return state(before.deployment, texts, nodes, record.encode())


def undo(after: rollout.ClusterState, force: bool = False) -> rollout.Plan:
    record = rollout.decode(after.configmap.record, "cm")
    restored = {k: yaml.safe_load(t) for k, t in record.keys.items() if t is not None}
    return rollout.rollback(after, record, restored, force)


def test_a_hand_edited_node_label_is_refused_with_the_edit_shown() -> None:
    before = state(helm(), {"any": PLAIN, "mine": ts(3)}, [gpu_node("a", 2), gpu_node("b", 2)])
    plan = rollout.make(before, ShareRequest(replicas=4, nodes=("a",)))
    after = written(before, plan, label="mine")  # then someone relabels node a by hand

    with pytest.raises(ShareRefused) as caught:
        undo(after)

    assert "the nvidia.com/device-plugin.config label of node(s) a were edited" in str(caught.value)
    assert caught.value.details == (
        "node a: nvidia.com/device-plugin.config=kubectl-gpu-ts-4 written by the change, now mine",
    )
    assert "--force" in caught.value.hint
    forced = undo(after, force=True)
    assert {c.node: c.after for c in forced.labels} == {"a": None}
    assert not undo(written(before, plan)).keys  # unedited: the rollback goes through


def test_a_hand_edited_cluster_policy_config_is_refused_with_the_edit_shown() -> None:
    before = state(operator(configured=False), {}, [gpu_node("a", 2)])
    plan = rollout.make(before, ShareRequest(replicas=4))
    assert plan.record.written_policy == ("time-slicing-config", "default")
    after = written(before, plan)
    # someone points the ClusterPolicy at another default key by hand
    edited_by_hand = dataclasses.replace(after, deployment=operator(default="mine"))

    with pytest.raises(ShareRefused) as caught:
        undo(edited_by_hand)

    assert "ClusterPolicy cluster-policy's spec.devicePlugin.config were edited" in str(
        caught.value
    )
    assert caught.value.details[-1] == (
        "ClusterPolicy cluster-policy spec.devicePlugin.config: {name: time-slicing-config, "
        "default: default} written by the change, now {name: time-slicing-config, default: mine}"
    )
    undo(edited_by_hand, force=True)


def test_what_was_written_survives_the_annotation_form_and_older_records_still_read() -> None:
    record = Record("nvidia.com/gpu", {}, {"a": None}, True, None, {},
                    {"a": "kubectl-gpu-ts-4"}, ("cm", "default"), True)  # fmt: skip
    assert rollout.decode(record.encode(), "cm") == record
    older = Record("nvidia.com/gpu", {}, {"a": None})
    assert rollout.decode(older.encode(), "cm").written_labels is None  # nothing to compare


def test_a_label_an_interrupted_change_never_wrote_is_no_edit() -> None:
    before = state(helm(), {"any": PLAIN}, [gpu_node("a", 2)])
    plan = rollout.make(before, ShareRequest(replicas=4, nodes=("a",)))
    never_labelled = written(before, plan, label=None)  # stopped before the label patch
    assert {c.node: c.after for c in undo(never_labelled).labels} == {}
