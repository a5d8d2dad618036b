"""What `kubectl gpu share`, `share off` and `share rollback` want written, before checking.

Owns `ShareRequest` and its argument checks, and the choice of contents, keys and labels:
a cluster-wide change edits the key unlabelled nodes read (the default key, set on the
ClusterPolicy when the GPU Operator has none); a per-node change gives the selected nodes a key
of their own, started from the config each node reads now (so its flags are kept), reused when
a key with the same parsed content exists and otherwise named `kubectl-gpu-<ts|mps>-<N>…`; a
rollback restores what the record kept. Keys are never removed or renamed. Must not check the
result against the nodes (plan.finish does) nor do I/O. Pure.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from kubectl_gpu import errors, keys
from kubectl_gpu.sharing import deployment as deployments
from kubectl_gpu.sharing import edits, model, names, strategies
from kubectl_gpu.sharing.rollout import plan, selection
from kubectl_gpu.sharing.rollout.nodes import GpuNode
from kubectl_gpu.sharing.rollout.plan import KeyChange, Plan, Target
from kubectl_gpu.sharing.rollout.record import Record
from kubectl_gpu.sharing.rollout.state import ClusterState, Doc, ShareRefused, Unknown

MPS_ROOT = "/run/nvidia/mps"  # the Helm chart's and the operator's (docs/upstream-facts.md P1.3)
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
MAX_LABEL_VALUE = 63


@dataclasses.dataclass(frozen=True)
class ShareRequest:
    """What the user asked for; `replicas` None turns sharing off, `nodes` None is cluster-wide."""

    replicas: int | None = None
    resource: str = names.DEFAULT_RESOURCE
    mps: bool = False
    rename_by_default: bool | None = None
    fail_requests_greater_than_one: bool | None = None
    nodes: tuple[str, ...] | None = None
    key: str | None = None

    @property
    def resource_name(self) -> str:
        return names.normalise_resource_name(self.resource)


def check_request(request: ShareRequest) -> None:
    """Refuse arguments no cluster could accept (UsageError, exit 2), before reading anything."""
    replicas = request.replicas
    if replicas is not None and (
        isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 2
    ):
        raise errors.UsageError(
            f"--replicas must be a whole number of at least 2, not {replicas!r}",
            hint="to stop sharing use `kubectl gpu share off` (upstream rejects replicas: 1)",
        )
    problem = _resource_problem(request.resource)
    if problem:
        raise errors.UsageError(
            f"invalid --resource '{request.resource}': {problem}",
            hint="use nvidia.com/gpu, or a MIG resource such as nvidia.com/mig-1g.10gb",
        )
    if request.mps:
        _check_mps_request(request)
    if request.key is not None and not _is_label_value(request.key):
        raise errors.UsageError(
            f"--key {request.key!r} cannot be selected by the node label "
            f"{keys.DEVICE_PLUGIN_CONFIG_LABEL}",
            hint="use at most 63 letters, digits, '-', '_' and '.', starting and ending with a "
            "letter or digit",
        )
    if request.nodes is not None and not request.nodes:
        raise errors.UsageError("no node was selected", hint="check --node or -l")


def _resource_problem(resource: str) -> str | None:
    if "/" in resource and not resource.startswith(names.RESOURCE_PREFIX):
        return "only the nvidia.com/ prefix is allowed"
    return names.upstream_error(resource)


def _check_mps_request(request: ShareRequest) -> None:
    cap = strategies.MPS_MAX_REPLICAS
    if request.replicas is not None and request.replicas > cap:
        raise errors.UsageError(
            f"MPS allows at most {cap} replicas per GPU, not {request.replicas}: the MPS control "
            'daemon would fail with "invalid MPS configuration: invalid device maximum allowed '
            f'replicas exceeded: {request.replicas} > {cap}"',
            hint=f"use --replicas {cap} or fewer (16 on GPUs below compute capability 7.5)",
        )
    if request.resource_name != names.DEFAULT_RESOURCE:
        raise errors.UsageError(
            f"MPS shares full GPUs only (nvidia.com/gpu), not {request.resource_name}",
            hint="use time-slicing (no --mps) to share MIG devices",
        )


def _is_label_value(value: str) -> bool:
    return len(value) <= MAX_LABEL_VALUE and _LABEL_VALUE.fullmatch(value) is not None


# ---- share and share off -------------------------------------------------------------------


def make(state: ClusterState, request: ShareRequest) -> Plan:
    """Plan `share --replicas N` or `share off` for the request's scope."""
    check_request(request)
    if request.nodes is None:
        return plan.finish(state, _cluster_wide(state, request))
    return plan.finish(state, _per_node(state, request))


def _cluster_wide(state: ClusterState, request: ShareRequest) -> Target:
    key = _cluster_key(state, request)
    configmap = state.configmap
    if request.replicas is None and key not in configmap.texts and not request.key:
        return _nothing_shared(state, request)
    base = configmap.doc(key) if key in configmap.texts else _unlabelled_doc(state)
    doc = _edit(base, request, state.deployment)
    changes = {}
    if key not in configmap.texts or configmap.docs.get(key) != doc:
        changes[key] = KeyChange(key, configmap.texts.get(key), doc)
    policy = _policy_after(state, key)
    target = Target(request.resource_name, changes, {}, policy, frozenset())
    after = plan.After(state, target)
    readers = {n.name for n in state.nodes if after.selection(n).key == key}
    if state.nodes and not readers and after.selection(_UNLABELLED).key != key:
        raise ShareRefused(
            f"no GPU node reads key {key!r}: unlabelled nodes read "
            f"{after.selection(_UNLABELLED).key or 'no key'}",
            hint="drop --key, or change the default key of the device plugin's deployment",
        )
    notes = tuple(
        f"node {n.name} reads key {after.selection(n).key or 'none'} and keeps it; "
        f"use --node {n.name} to change it too"
        for n in state.nodes
        if n.name not in readers and after.selection(n).ok
    )
    return dataclasses.replace(target, scope=frozenset(readers), notes=notes)


_UNLABELLED = GpuNode("", {}, {}, {})


def _nothing_shared(state: ClusterState, request: ShareRequest) -> Target:
    """`share off` where unlabelled nodes read no key: nothing to write, stale plugins only."""
    policy = state.deployment.policy_config if state.deployment.kind == "gpu-operator" else None
    target = Target(request.resource_name, {}, {}, policy, frozenset())
    after = plan.After(state, target)
    unlabelled = after.selection(_UNLABELLED).key
    scope = {n.name for n in state.nodes if after.selection(n).key == unlabelled}
    return dataclasses.replace(target, scope=frozenset(scope))


def _cluster_key(state: ClusterState, request: ShareRequest) -> str:
    deployment = state.deployment
    if request.key:
        return request.key
    if deployment.default_key:
        return deployment.default_key
    if deployment.kind != "gpu-operator":
        chosen = state.selection_before(_UNLABELLED)
        if chosen.ok and chosen.key != selection.EMPTY:
            return chosen.key  # config-manager's `named` or `single` fallback
    return keys.DEFAULT_CONFIG_KEY


def _unlabelled_doc(state: ClusterState) -> Doc:
    doc = state.doc_before(_UNLABELLED)
    return {} if isinstance(doc, Unknown) else doc


def _policy_after(state: ClusterState, default_key: str) -> tuple[str, str] | None:
    if state.deployment.kind != "gpu-operator":
        return None
    return state.deployment.configmap, default_key


def _per_node(state: ClusterState, request: ShareRequest) -> Target:
    wanted = tuple(sorted(set(request.nodes or ())))
    nodes = [_gpu_node(state, name) for name in wanted]
    changes: dict[str, KeyChange] = {}
    labels: dict[str, str | None] = {}
    notes: list[str] = []
    default_key = state.deployment.default_key
    for node in nodes:
        base = _node_base(state, node, notes)
        if request.replicas is None and edits.without_sharing(base) == base:
            notes.append(f"node {node.name} shares nothing now; nothing to turn off there")
            continue  # no key, no label: the plugin keeps its config and is not restarted
        doc = _edit(base, request, state.deployment)
        if request.mps:
            doc = _mps_strategy(state, node, doc, notes)
        key = request.key or _key_for(state, changes, doc, node, request.resource_name)
        _claim(state, changes, key, doc, wanted)
        if node.config_label != key:
            labels[node.name] = key
    policy = _policy_after(state, default_key) if state.deployment.kind == "gpu-operator" else None
    return Target(request.resource_name, changes, labels, policy, frozenset(wanted), tuple(notes))


def _mps_strategy(
    state: ClusterState, node: GpuNode, doc: dict[str, Any], notes: list[str]
) -> dict[str, Any]:
    """A node's own MPS key says `migStrategy: none` where it started from `mixed` (the bundle's
    default key has it, for the MIG nodes beside): the plugin refuses MPS beside `mixed`
    (docs/first-try-safety.md), and a node with no MIG-enabled GPU advertises the same
    whole GPUs under either. A MIG-enabled node, or an env var forcing the strategy, is left
    for the plan to refuse, saying what to do."""
    given = doc.get("flags")
    flags: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    if flags.get("migStrategy") != "mixed" or node.mig_enabled:
        return doc
    if deployments.effective_flag(state.deployment, ("migStrategy",)) is not None:
        return doc  # the env var wins over the key
    notes.append(
        f"node {node.name}: its MPS key sets migStrategy none (was mixed): the device plugin "
        "refuses MPS with mixed, and the node has no MIG-enabled GPU, so it advertises the "
        "same GPUs; to partition it with MIG later, stop MPS there first (`kubectl gpu share "
        f"off --node {node.name}`)"
    )
    return {**doc, "flags": {**flags, "migStrategy": "none"}}


def _gpu_node(state: ClusterState, name: str) -> GpuNode:
    node = state.node(name)
    if node is None:
        raise errors.UsageError(
            f"node {name} has no NVIDIA GPU (no nvidia.com/* resources or GPU labels)",
            hint="pick GPU nodes: kubectl get nodes -l nvidia.com/gpu.present=true",
        )
    return node


def _node_base(state: ClusterState, node: GpuNode, notes: list[str]) -> Doc:
    doc = state.doc_before(node)
    if not isinstance(doc, Unknown):
        return doc
    fallback = _unlabelled_doc(state)
    notes.append(
        f"node {node.name} reads no usable config now; its new key starts from the default"
    )
    return fallback


def _claim(
    state: ClusterState, changes: dict[str, KeyChange], key: str, doc: Doc, scope: tuple[str, ...]
) -> None:
    """Plan `doc` under `key`, unless it is there already; refuse to change others' configs."""
    texts, docs = state.configmap.texts, state.configmap.docs
    planned = changes.get(key)
    if planned is not None and planned.doc != doc:
        raise ShareRefused(
            f"the selected nodes read different configs now, so key {key} cannot hold the "
            "result for all of them",
            hint="drop --key: each group of nodes then gets a key of its own",
        )
    if planned is not None or (key in docs and docs[key] == doc):
        return
    readers = [
        n.name for n in state.nodes if n.name not in scope and state.selection_before(n).key == key
    ]
    if readers:
        raise ShareRefused(
            f"key {key} is also read by node(s) {', '.join(readers)}: changing it would change "
            "them too",
            hint="choose another --key, or include those nodes",
        )
    changes[key] = KeyChange(key, texts.get(key), doc)


def _key_for(
    state: ClusterState, changes: Mapping[str, KeyChange], doc: Doc, node: GpuNode, resource: str
) -> str:
    """Reuse a key with this content (never the default key), else a deterministic name."""
    default_key = state.deployment.default_key
    docs: dict[str, Doc] = {**state.configmap.docs, **{k: c.doc for k, c in changes.items()}}
    current = node.config_label
    if current and current != default_key and current in docs and docs[current] == doc:
        return current
    same = sorted(k for k, d in docs.items() if d == doc and k != default_key)
    name = key_name(doc, resource)
    if name in same or (same and name not in docs):
        return name if name in same else same[0]
    if name not in docs and name not in state.configmap.texts:
        return name
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:6]
    return f"{name[: MAX_LABEL_VALUE - 7]}-{digest}"


def key_name(doc: Doc, resource: str) -> str:
    """`kubectl-gpu-ts-4`, `kubectl-gpu-mps-2`, `kubectl-gpu-ts-4-mig-1g.10gb-shared`, `…-off`."""
    config = model.DevicePluginConfig.from_dict(doc)
    sharing = config.sharing
    shared = (
        None
        if sharing is None
        else next((r for r in sharing.resources if r.name == resource), None)
    )
    if sharing is None or shared is None or config.strategy == "none":
        return keys.PER_NODE_KEY_PREFIX + "off"
    parts = ["ts" if sharing.strategy == "time-slicing" else "mps", str(shared.replicas)]
    if resource != names.DEFAULT_RESOURCE:
        parts.append(resource.removeprefix(names.RESOURCE_PREFIX))
    if sharing.rename_by_default:
        parts.append("shared")
    name = keys.PER_NODE_KEY_PREFIX + "-".join(parts)
    return name[:MAX_LABEL_VALUE].rstrip("-_.")


def _edit(base: Doc, request: ShareRequest, deployment: deployments.Deployment) -> dict[str, Any]:
    if request.replicas is None:
        off = edits.without_sharing(base)
        return off or {"version": "v1"}
    doc = edits.with_replicas(
        base,
        request.replicas,
        resource=request.resource,
        mps=request.mps,
        rename_by_default=request.rename_by_default,
        fail_requests_greater_than_one=request.fail_requests_greater_than_one,
    )
    given = doc.get("flags")
    flags: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    forced = deployments.effective_flag(deployment, ("mpsRoot",))
    if request.mps and not flags.get("mpsRoot") and not forced:
        # The plugin exits with "using MPS requires --mps-root" otherwise
        # (docs/upstream-facts.md P1.7).
        doc["flags"] = {**flags, "mpsRoot": MPS_ROOT}
    return doc


# ---- rollback -------------------------------------------------------------------------------


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
