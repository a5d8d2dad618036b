"""What `kubectl gpu share rollback` wants written: what the last change's record kept.

Owns the rollback target (each kept key text, each node's label, the ClusterPolicy's config)
and the refusal of a rollback that would throw away a hand edit made since (found and shown by
`handedits`, the comparison `share` makes too), unless forced. Keys the change added stay. Must
not check the result against the nodes (plan.finish does) nor do I/O. Pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from kubectl_gpu.sharing.rollout import handedits, plan
from kubectl_gpu.sharing.rollout.plan import KeyChange, Plan, Target
from kubectl_gpu.sharing.rollout.record import Record
from kubectl_gpu.sharing.rollout.state import ClusterState, Doc, ShareRefused

WRITTEN_BY = "written by the change"


def rollback(
    state: ClusterState, record: Record, restored: Mapping[str, Doc], force: bool = False
) -> Plan:
    """Plan restoring what `record` kept; `restored` holds each kept text, parsed. A key
    edited by hand since that change is refused (its diff shown) unless `force`: restoring
    would silently throw the edit away."""
    texts = state.configmap.texts
    edits = handedits.compare(state, (record,))
    if not force:
        _refuse_edited(state, edits)
    changes, notes = {}, []
    for key, text in sorted(record.keys.items()):
        if text is None:
            notes.append(f"key {key} was added by that change; it stays (no node reads it after)")
        elif texts.get(key) != text:
            changes[key] = KeyChange(key, texts.get(key), restored[key], text=text)
    labels: dict[str, str | None] = {}
    for name, value in sorted(record.labels.items()):
        node = state.node(name)
        if node is None:
            notes.append(f"node {name} is gone; its label is not restored")
        elif node.config_label != value:
            labels[name] = value
    deployment = state.deployment
    policy = record.policy if record.policy_changed else deployment.policy_config
    target = Target(record.resource, changes, labels, policy, frozenset(), tuple(notes))
    after = plan.After(state, target)
    scope = {
        n.name for n in state.nodes if n.name in record.labels or after.selection(n).key in changes
    }
    planned = plan.finish(state, dataclasses.replace(target, scope=frozenset(scope)))
    return dataclasses.replace(planned, overwrites=edits.details(state, WRITTEN_BY))


def _refuse_edited(state: ClusterState, edits: handedits.HandEdits) -> None:
    """What the change to roll back wrote must still be there: a ConfigMap key, a node's
    config label or the ClusterPolicy's `devicePlugin.config` edited by hand since would be
    thrown away by restoring; refuse, showing each edit."""
    if not edits:
        return
    raise ShareRefused(
        f"{edits.objects(state)} were edited after the change to roll back was written; "
        "rolling back would throw that edit away; nothing was written:",
        hint="keep the edit (make it the new config with `kubectl gpu share`), or discard it "
        "with `kubectl gpu share rollback --force`",
        details=edits.details(state, WRITTEN_BY),
    )
