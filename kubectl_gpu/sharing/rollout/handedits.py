"""Hand edits: what kubectl gpu last wrote, against what is there now.

Owns the one comparison `share`, `share off` and `share rollback` make before their first
write (docs/first-try-safety.md): for each ConfigMap key, node `nvidia.com/device-plugin.config`
label and the GPU Operator ClusterPolicy's `spec.devicePlugin.config`, the newest rollback
record that wrote it says what was written; a value found different was edited since, by hand
or by another tool. A label or ClusterPolicy config still at its value from before that write
was never written (an interrupted change) and is no edit. Also owns how edits are named and
shown (a diff for keys, written → now for labels and the ClusterPolicy). Must not decide
whether an edit is refused (`rollback` and `targets` do) nor do I/O. Pure.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping, Sequence

from kubectl_gpu import keys
from kubectl_gpu.sharing.rollout.plan import Plan
from kubectl_gpu.sharing.rollout.record import Record
from kubectl_gpu.sharing.rollout.state import ClusterState

Policy = tuple[str, str] | None  # the ClusterPolicy's (config.name, config.default); None: unset
LABEL = keys.DEVICE_PLUGIN_CONFIG_LABEL


@dataclasses.dataclass(frozen=True)
class HandEdits:
    """What differs from what kubectl gpu last wrote."""

    keys: Mapping[str, str] = dataclasses.field(default_factory=dict)  # key -> text written
    labels: Mapping[str, tuple[str | None, str | None]] = dataclasses.field(
        default_factory=dict
    )  # node -> (label written, label now); None: unset
    policy: tuple[Policy, Policy] | None = None  # (written, now), where they differ

    def __bool__(self) -> bool:
        return bool(self.keys or self.labels or self.policy)

    def overwritten_by(self, plan: Plan) -> HandEdits:
        """The edits `plan` writes over: the labels it changes and the ClusterPolicy config
        when it changes it. Keys are left out: a share builds on a key's text as it is."""
        changed = {c.node for c in plan.labels}
        labels = {n: edit for n, edit in self.labels.items() if n in changed}
        return HandEdits({}, labels, self.policy if plan.policy is not None else None)

    def objects(self, state: ClusterState) -> str:
        """The edited objects and fields, named for a sentence."""
        configmap = state.configmap
        what = []
        if self.keys:
            what.append(
                f"key(s) {', '.join(self.keys)} of ConfigMap {configmap.namespace}/{configmap.name}"
            )
        if self.labels:
            what.append(f"the {LABEL} label of node(s) {', '.join(self.labels)}")
        if self.policy:
            what.append(
                f"ClusterPolicy {state.deployment.cluster_policy}'s spec.devicePlugin.config"
            )
        return " and ".join(what)

    def details(self, state: ClusterState, by: str) -> tuple[str, ...]:
        """Each edit: a diff per key, `written by …, now …` per label and for the ClusterPolicy;
        `by` says who wrote it ("written by the change")."""
        lines: list[str] = []
        for key, written in self.keys.items():
            now = state.configmap.texts.get(key)
            lines += difflib.unified_diff(
                written.splitlines(),
                (now or "").splitlines(),
                f"{key} ({by})",
                f"{key} (now)" if now is not None else f"{key} (now: deleted)",
                lineterm="",
            )
        lines += [
            f"node {node}: {LABEL}={written or '(unset)'} {by}, now {now or '(unset)'}"
            for node, (written, now) in self.labels.items()
        ]
        if self.policy:
            written_policy, now_policy = self.policy
            lines.append(
                f"ClusterPolicy {state.deployment.cluster_policy} spec.devicePlugin.config: "
                f"{policy_text(written_policy)} {by}, now {policy_text(now_policy)}"
            )
        return tuple(lines)


def compare(state: ClusterState, records: Sequence[Record]) -> HandEdits:
    """The edits made since `records` (newest first) were written: each key, label and the
    ClusterPolicy config is compared with the newest record that wrote it. What a record
    wrote but did not keep (records from before it was kept) is not compared."""
    texts = state.configmap.texts
    edited_keys: dict[str, str] = {}
    labels: dict[str, tuple[str | None, str | None]] = {}
    seen_keys: set[str] = set()
    seen_nodes: set[str] = set()
    policy: tuple[Policy, Policy] | None = None
    policy_seen = False
    for record in records:
        for key in sorted(set(record.keys) - seen_keys):
            seen_keys.add(key)
            written = record.written.get(key)
            if written is not None and texts.get(key) != written:
                edited_keys[key] = written
        for name in sorted(set(record.labels) - seen_nodes):
            seen_nodes.add(name)
            edit = _edited_label(state, record, name)
            if edit is not None:
                labels[name] = edit
        if record.policy_changed and not policy_seen:
            policy_seen = True
            policy = _edited_policy(state, record)
    return HandEdits(edited_keys, labels, policy)


def _edited_label(
    state: ClusterState, record: Record, name: str
) -> tuple[str | None, str | None] | None:
    """(label written, label now) of one node, where they differ; None for a gone node and
    for a label still at its value before the change (an interrupted change never wrote it)."""
    if record.written_labels is None or name not in record.written_labels:
        return None
    written, node = record.written_labels[name], state.node(name)
    if node is None or node.config_label in (written, record.labels.get(name)):
        return None
    return written, node.config_label


def _edited_policy(state: ClusterState, record: Record) -> tuple[Policy, Policy] | None:
    """(written, now) of the ClusterPolicy's devicePlugin.config, where they differ."""
    deployment = state.deployment
    if not record.written_policy_kept or deployment.kind != "gpu-operator":
        return None
    now = deployment.policy_config
    if now in (record.written_policy, record.policy):  # as written, or never written
        return None
    return record.written_policy, now


def policy_text(policy: Policy) -> str:
    """A ClusterPolicy config as the user would write it."""
    return "(none)" if policy is None else f"{{name: {policy[0]}, default: {policy[1]}}}"
