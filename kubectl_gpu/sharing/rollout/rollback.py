"""What `kubectl gpu share rollback` wants written: what the last change's record kept.

Owns the rollback target (each kept key text, each node's label, the ClusterPolicy's config)
and the refusal of a rollback that would throw away a hand edit made since (shown as a diff),
unless forced. Keys the change added stay. Must not check the result against the nodes
(plan.finish does) nor do I/O. Pure.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping

from kubectl_gpu import keys
from kubectl_gpu.sharing.rollout import plan
from kubectl_gpu.sharing.rollout.plan import KeyChange, Plan, Target
from kubectl_gpu.sharing.rollout.record import Record
from kubectl_gpu.sharing.rollout.state import ClusterState, Doc, ShareRefused


def rollback(
    state: ClusterState, record: Record, restored: Mapping[str, Doc], force: bool = False
) -> Plan:
    """Plan restoring what `record` kept; `restored` holds each kept text, parsed. A key
    edited by hand since that change is refused (its diff shown) unless `force`: restoring
    would silently throw the edit away."""
    texts = state.configmap.texts
    if not force:
        _refuse_edited(state, record)
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
    return plan.finish(state, dataclasses.replace(target, scope=frozenset(scope)))


def _refuse_edited(state: ClusterState, record: Record) -> None:
    """What the change to roll back wrote must still be there: a ConfigMap key, a node's
    config label or the ClusterPolicy's `devicePlugin.config` edited by hand since would be
    thrown away by restoring; refuse, showing each edit."""
    configmap = state.configmap
    where = f"ConfigMap {configmap.namespace}/{configmap.name}"
    edited = {k: w for k, w in sorted(record.written.items()) if configmap.texts.get(k) != w}
    labels = _edited_labels(state, record)
    policy = _edited_policy(state, record)
    if not (edited or labels or policy):
        return
    diff: list[str] = []
    for key, written in edited.items():
        now = configmap.texts.get(key)
        diff += difflib.unified_diff(
            written.splitlines(),
            (now or "").splitlines(),
            f"{key} (written by the change to roll back)",
            f"{key} (now)" if now is not None else f"{key} (now: deleted)",
            lineterm="",
        )
    label = keys.DEVICE_PLUGIN_CONFIG_LABEL
    diff += [
        f"node {node}: {label}={written or '(unset)'} written by the change, now {now or '(unset)'}"
        for node, (written, now) in labels.items()
    ]
    if policy:
        name, (written_policy, now_policy) = state.deployment.cluster_policy, policy
        diff.append(
            f"ClusterPolicy {name} spec.devicePlugin.config: {_policy_text(written_policy)} "
            f"written by the change, now {_policy_text(now_policy)}"
        )
    what = [f"key(s) {', '.join(edited)} of {where}"] if edited else []
    if labels:
        what.append(f"the {label} label of node(s) {', '.join(labels)}")
    if policy:
        what.append(f"ClusterPolicy {state.deployment.cluster_policy}'s spec.devicePlugin.config")
    raise ShareRefused(
        f"{' and '.join(what)} were edited after the change to roll back was written; rolling "
        "back would throw that edit away; nothing was written:",
        hint="keep the edit (make it the new config with `kubectl gpu share`), or discard it "
        "with `kubectl gpu share rollback --force`",
        details=tuple(diff),
    )


def _edited_labels(state: ClusterState, record: Record) -> dict[str, tuple[str | None, str | None]]:
    """Node -> (label written, label now), where they differ; gone nodes are left out, and so
    is a label still at its value before the change (an interrupted change never wrote it:
    restoring it throws nothing away)."""
    found = {}
    for name, written in sorted((record.written_labels or {}).items()):
        node = state.node(name)
        if node is None or node.config_label in (written, record.labels.get(name)):
            continue
        found[name] = (written, node.config_label)
    return found


Policy = tuple[str, str] | None


def _edited_policy(state: ClusterState, record: Record) -> tuple[Policy, Policy] | None:
    """(written, now) of the ClusterPolicy's devicePlugin.config, where they differ."""
    deployment = state.deployment
    if not record.written_policy_kept or deployment.kind != "gpu-operator":
        return None
    now = deployment.policy_config
    if now in (record.written_policy, record.policy):  # as written, or never written
        return None
    return record.written_policy, now


def _policy_text(policy: Policy) -> str:
    return "(none)" if policy is None else f"{{name: {policy[0]}, default: {policy[1]}}}"
