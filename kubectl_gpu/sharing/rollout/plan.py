"""A planned sharing change, checked: what is written, which nodes it reaches, what they become.

Owns `Plan` and `finish()`, which turns a `Target` (new key contents, node labels, the
ClusterPolicy's config) into a plan: the key every GPU node reads afterwards, the nodes whose config
changes or whose advertised capacity does not match their config (the plugin reads its config only
at start, docs/upstream-facts.md P3.3), each such node's expected allocatable (physical devices ×
replicas under the advertised name), the rollback record, and the refusals that depend on the nodes
(config-manager failing after the change, MPS limits, docs/upstream-facts.md P1.7, P8). Must not
choose contents or keys (targets.py does) nor do I/O. Pure (a config's parse is cached).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping
from typing import Any

from kubectl_gpu import errors, keys, numbers
from kubectl_gpu.sharing import deployment as deployments
from kubectl_gpu.sharing import model, names
from kubectl_gpu.sharing.rollout import mps, selection
from kubectl_gpu.sharing.rollout.nodes import GpuNode
from kubectl_gpu.sharing.rollout.record import Record
from kubectl_gpu.sharing.rollout.selection import Selection
from kubectl_gpu.sharing.rollout.state import (
    ClusterState,
    Doc,
    ShareRefused,
    Unknown,
)

ROLLED = (
    "not selected, but the GPU Operator restarts its plugin here too: the ClusterPolicy's "
    "spec.devicePlugin.config changes, and the operator rolls its device-plugin DaemonSet "
    "over every GPU node"
)


@dataclasses.dataclass(frozen=True)
class KeyChange:
    """New content for one ConfigMap key; `text` when it is restored verbatim."""

    key: str
    before: str | None  # the text it had; None when the key is new
    doc: Doc
    text: str | None = None


@dataclasses.dataclass(frozen=True)
class LabelChange:
    """A node's `nvidia.com/device-plugin.config` label, before and after (None: unset)."""

    node: str
    before: str | None
    after: str | None


@dataclasses.dataclass(frozen=True)
class PolicyChange:
    """The ClusterPolicy's `spec.devicePlugin.config` (name, default), before and after."""

    name: str
    before: tuple[str, str] | None
    after: tuple[str, str] | None

    def patch(self) -> dict[str, Any]:
        """A JSON merge patch that makes the change."""
        config = None if self.after is None else {"name": self.after[0], "default": self.after[1]}
        return {"spec": {"devicePlugin": {"config": config}}}


@dataclasses.dataclass(frozen=True)
class Target:
    """What a change wants; `scope` is the nodes the user asked to change."""

    resource: str
    keys: Mapping[str, KeyChange]
    labels: Mapping[str, str | None]  # node -> label after; only nodes whose label changes
    policy: tuple[str, str] | None  # the ClusterPolicy's config afterwards (GPU Operator)
    scope: frozenset[str]
    notes: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class NodePlan:
    """One node in scope or reached by the change, and what it should advertise afterwards."""

    node: str
    key: str  # the key it reads afterwards ("" for none: the plugin's defaults)
    strategy: model.Strategy
    replicas: int
    resource: str  # the name advertised afterwards (renamed when renameByDefault)
    gpus: int | None  # physical devices behind the resource; None when unknown
    before: int  # allocatable of the resource before, under the name advertised then
    expected: int | None  # gpus × replicas
    restart: bool  # whether its plugin must restart to read its config
    reason: str
    beyond: bool = False  # restarted though the user did not select it (the operator's roll)
    product: str = ""  # GFD's nvidia.com/gpu.product, less -SHARED ("" unlabelled): a config
    # is proven per (key, product) on the rollout's first node of each (docs/first-try-safety.md)


@dataclasses.dataclass(frozen=True)
class Plan:
    """A checked change: the writes in order, the nodes it reaches, how to undo it."""

    deployment: deployments.Deployment
    namespace: str
    configmap: str
    create: bool  # the ConfigMap does not exist yet
    keys: tuple[KeyChange, ...]
    labels: tuple[LabelChange, ...]
    policy: PolicyChange | None
    nodes: tuple[NodePlan, ...]
    notes: tuple[str, ...]
    record: Record
    overwrites: tuple[str, ...] = ()  # hand edits it writes over (--force), each shown

    @property
    def writes(self) -> bool:
        """Whether anything is written (a plan may only restart stale plugins)."""
        return bool(self.keys or self.labels or self.policy)

    @property
    def restarts(self) -> tuple[NodePlan, ...]:
        return tuple(n for n in self.nodes if n.restart)

    @property
    def beyond_scope(self) -> tuple[NodePlan, ...]:
        """Nodes whose plugin restarts although the request did not select them."""
        return tuple(n for n in self.nodes if n.restart and n.beyond)


@dataclasses.dataclass(frozen=True)
class After:
    """The ConfigMap keys, default and labels once a target is written."""

    state: ClusterState
    target: Target

    @property
    def default_key(self) -> str:
        if self.state.deployment.kind == "gpu-operator":
            return self.target.policy[1] if self.target.policy else ""
        return self.state.deployment.default_key

    def keys(self) -> set[str]:
        return {*self.state.configmap.texts, *self.target.keys}

    def labels(self, node: GpuNode) -> dict[str, str]:
        labels = dict(node.labels)
        if node.name in self.target.labels:
            after = self.target.labels[node.name]
            labels.pop(keys.DEVICE_PLUGIN_CONFIG_LABEL, None)
            if after is not None:
                labels[keys.DEVICE_PLUGIN_CONFIG_LABEL] = after
        return labels

    def selection(self, node: GpuNode) -> Selection:
        if self.state.deployment.kind == "gpu-operator" and self.target.policy is None:
            return Selection(selection.EMPTY, "unset")
        fallbacks = self.state.deployment.fallback_strategies
        return selection.select(self.labels(node), self.keys(), self.default_key, fallbacks)

    def doc(self, key: str) -> Doc:
        if key in self.target.keys:
            return self.target.keys[key].doc
        return self.state.configmap.doc(key)


def finish(state: ClusterState, target: Target) -> Plan:
    """Check `target` against every GPU node and plan its writes, restarts and verification."""
    after = After(state, target)
    _refuse_broken_selections(state, after)
    rolled = _policy_change(state, target) is not None
    nodes = tuple(p for n in state.nodes if (p := _node_plan(state, after, n, rolled)) is not None)
    for planned in nodes:
        node = state.node(planned.node)
        if planned.strategy == "mps" and node is not None:
            mps.check(state, node, planned.key, after.doc(planned.key), planned.replicas)
    return Plan(
        deployment=state.deployment,
        namespace=state.configmap.namespace,
        configmap=state.configmap.name,
        create=not state.configmap.exists,
        keys=tuple(target.keys[k] for k in sorted(target.keys)),
        labels=_label_changes(state, target),
        policy=_policy_change(state, target),
        nodes=nodes,
        notes=target.notes + _override_notes(state, target),
        record=_record(state, target),
    )


def _refuse_broken_selections(state: ClusterState, after: After) -> None:
    """No node may be left selecting a missing key (config-manager exits 1, docs/upstream-facts.md
    P3.2)."""
    for node in state.nodes:
        chosen = after.selection(node)
        if chosen.ok:
            continue
        if state.selection_before(node).ok or node.name in after.target.scope:
            raise ShareRefused(
                f"after this change, config-manager on node {node.name} would fail with "
                f'"{chosen.error}" and the node would lose its GPUs at the next plugin restart',
                hint=_selection_hint(state, chosen),
            )


def _selection_hint(state: ClusterState, chosen: Selection) -> str:
    deployment = state.deployment
    if chosen.how in ("none", "single"):
        return (
            f"the node relies on config-manager's fallbacks "
            f"({','.join(deployment.fallback_strategies)}); set a default key first "
            f"(Helm: --set config.default=KEY) or pass --key {keys.DEFAULT_CONFIG_KEY}"
        )
    return "label the node with an existing key, or create the key first"


def _node_plan(state: ClusterState, after: After, node: GpuNode, rolled: bool) -> NodePlan | None:
    """`rolled`: the ClusterPolicy's config changes, so the GPU Operator re-renders its plugin
    DaemonSet (config-manager's DEFAULT_CONFIG and the config volume are in the pod template)
    and the DaemonSet controller replaces the plugin pod on every node it runs on, whatever
    the request selected (docs/first-try-safety.md)."""
    chosen_before, chosen = state.selection_before(node), after.selection(node)
    if not chosen.ok:
        return None  # broken before and out of scope: reported, not touched
    moved = _moves(chosen_before, chosen, isinstance(state.doc_before(node), Unknown))
    rewritten = chosen.key in after.target.keys
    in_scope = node.name in after.target.scope
    if not (moved or rewritten or in_scope or rolled):
        return None
    resource = after.target.resource
    replicas_then, name_then = sharing_of(state.doc_before(node), resource)
    doc = after.doc(chosen.key)
    replicas, name = sharing_of(doc, resource)
    gpus = node.physical(resource) or gpus_from_allocatable(node, resource, replicas_then)
    expected = None if gpus is None else gpus * replicas
    stale = expected is not None and node.allocatable.get(name, 0) != expected
    restart, reason = _why(chosen_before, chosen, (moved, rewritten, stale))
    beyond = rolled and not in_scope
    if beyond:
        restart, reason = True, f"{ROLLED}; {reason}"
    return NodePlan(
        node=node.name,
        key=chosen.key,
        strategy=strategy_of(doc),
        replicas=replicas,
        resource=name,
        gpus=gpus,
        before=node.allocatable.get(name_then, 0),
        expected=expected,
        restart=restart,
        reason=reason,
        beyond=beyond,
        product=_model(node.labels.get(keys.GPU_PRODUCT_LABEL, "")),
    )


def _model(product: str) -> str:
    """The GPU model from GFD's product label, less the `-SHARED` GFD adds while the GPUs are
    shared (docs/upstream-facts.md P2.3): a node already shared and one not yet are one model to
    prove a config on."""
    return product.removesuffix("-SHARED")


def _moves(before: Selection, after: Selection, unknown_before: bool) -> bool:
    """Whether the node reads another config afterwards (a key, or ours instead of none)."""
    unset_before, unset_after = before.how == "unset", after.how == "unset"
    return after.key != before.key or unset_before != unset_after or unknown_before


def _why(before: Selection, after: Selection, changes: tuple[bool, bool, bool]) -> tuple[bool, str]:
    moved, rewritten, stale = changes
    if moved:
        was = f" (was {before.key or 'none'})" if before.how != "unset" else ""
        return True, f"selects key {after.key or 'none'}{was}"
    if rewritten:
        return True, f"key {after.key} changes"
    if stale:
        return True, "advertises a different capacity than its config: the plugin runs an older one"
    return False, "already as wanted"


def sharing_of(doc: Doc | Unknown, resource: str) -> tuple[int, str]:
    """(replicas per device, advertised name) of `resource` under a config."""
    config = model_of(doc)
    if config is None or config.sharing is None or config.strategy == "none":
        return 1, resource
    for shared in config.sharing.resources:
        if shared.name == resource:
            return shared.replicas, shared.advertised_name(config.sharing.rename_by_default)
    return 1, resource


def strategy_of(doc: Doc | Unknown) -> model.Strategy:
    config = model_of(doc)
    return "none" if config is None else config.strategy


def model_of(doc: Doc | Unknown) -> model.DevicePluginConfig | None:
    if isinstance(doc, Unknown):
        return None
    return _model_of_text(json.dumps(doc, sort_keys=True, default=str))


@functools.lru_cache(maxsize=64)  # a fleet reads a few configs: each parsed once, not per node
def _model_of_text(text: str) -> model.DevicePluginConfig | None:
    try:
        return model.DevicePluginConfig.from_dict(json.loads(text))
    except errors.ConfigError:
        return None  # an invalid config: the plugin crash-loops on it and advertises nothing


def gpus_from_allocatable(node: GpuNode, resource: str, replicas: int) -> int | None:
    """Physical devices from what the node advertises now, when GFD did not label them."""
    advertised = max(
        node.allocatable.get(resource, 0),
        node.allocatable.get(resource + names.SHARED_SUFFIX, 0),
    )
    candidates = [replicas]
    labelled = numbers.whole(node.labels.get(resource + ".replicas", ""))
    if labelled:
        candidates.insert(0, labelled)  # GFD's view of the running config comes first
    for each in candidates:
        if advertised > 0 and advertised % each == 0:
            return advertised // each
    return None


def _label_changes(state: ClusterState, target: Target) -> tuple[LabelChange, ...]:
    changes = []
    for name in sorted(target.labels):
        node = state.node(name)
        before = node.config_label if node is not None else None
        if before != target.labels[name]:
            changes.append(LabelChange(name, before, target.labels[name]))
    return tuple(changes)


def _policy_change(state: ClusterState, target: Target) -> PolicyChange | None:
    deployment = state.deployment
    if deployment.kind != "gpu-operator" or deployment.policy_config == target.policy:
        return None
    return PolicyChange(deployment.cluster_policy, deployment.policy_config, target.policy)


def _record(state: ClusterState, target: Target) -> Record:
    policy = _policy_change(state, target)
    labels = _label_changes(state, target)
    return Record(
        resource=target.resource,
        keys={k: state.configmap.texts.get(k) for k in sorted(target.keys)},
        labels={c.node: c.before for c in labels},
        policy_changed=policy is not None,
        policy=policy.before if policy is not None else None,
        written_labels={c.node: c.after for c in labels},
        written_policy=policy.after if policy is not None else None,
        written_policy_kept=policy is not None,
    )


def _override_notes(state: ClusterState, target: Target) -> tuple[str, ...]:
    """Env vars on the plugin container win over the file (docs/upstream-facts.md P1.1): say where
    they contradict."""
    return tuple(
        f"key {change.key}: flags.{path} is {value!r} but the plugin container's env "
        f"{env}={forced} overrides it"
        for change in target.keys.values()
        for env, forced, path, value in deployments.overridden_flags(state.deployment, change.doc)
    )
