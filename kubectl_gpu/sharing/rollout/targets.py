"""What `kubectl gpu share` and `share off` want written, before checking.

Owns the choice of contents, keys and labels: a cluster-wide change edits the key unlabelled
nodes read (the default key, set on the ClusterPolicy when the GPU Operator has none); a
per-node change gives the selected nodes a key of their own, started from the config each node
reads now (so its flags are kept), reused when a key with the same parsed content exists and
otherwise named by `keynames`. Keys are never removed or renamed. A node label or ClusterPolicy
config the change would write over, edited since kubectl gpu last wrote it (`handedits`), is
refused unless forced. The request and its checks are `request`'s; a rollback's target is
`rollback`'s. Must not check the result against the nodes (plan.finish does) nor do I/O. Pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kubectl_gpu import errors, keys
from kubectl_gpu.sharing import deployment as deployments
from kubectl_gpu.sharing import edits
from kubectl_gpu.sharing.rollout import handedits, plan, record, selection
from kubectl_gpu.sharing.rollout.keynames import key_for
from kubectl_gpu.sharing.rollout.nodes import GpuNode
from kubectl_gpu.sharing.rollout.plan import KeyChange, Plan, Target
from kubectl_gpu.sharing.rollout.request import ShareRequest, check_request
from kubectl_gpu.sharing.rollout.state import ClusterState, Doc, ShareRefused, Unknown

MPS_ROOT = "/run/nvidia/mps"  # the Helm chart's and the operator's (docs/upstream-facts.md P1.3)


def make(state: ClusterState, request: ShareRequest, force: bool = False) -> Plan:
    """Plan `share --replicas N` or `share off` for the request's scope. A node label or
    ClusterPolicy config it would write over, edited since kubectl gpu last wrote it, is
    refused unless `force` (then the plan names each edit it overwrites)."""
    check_request(request)
    if request.nodes is None:
        planned = plan.finish(state, _cluster_wide(state, request))
    else:
        planned = plan.finish(state, _per_node(state, request))
    records = record.history(state.configmap.record)
    edits = handedits.compare(state, records).overwritten_by(planned)
    if edits and not force:
        _refuse_overwrite(state, edits)
    return dataclasses.replace(planned, overwrites=edits.details(state, LAST_WRITTEN))


LAST_WRITTEN = "last written by kubectl gpu"


def _refuse_overwrite(state: ClusterState, edits: handedits.HandEdits) -> None:
    """A share that would silently throw away an edit made since kubectl gpu last wrote the
    field is refused, saying how to overwrite it or build on it instead."""
    adopt = [
        f"node {node}: share into the key it reads now (--node {node} --key {now})"
        if now
        else f"node {node}: leave it out of --node/-l"
        for node, (_, now) in edits.labels.items()
    ]
    if edits.policy:
        now_policy = edits.policy[1]
        adopt.append(
            "the ClusterPolicy names no config now: to keep it so, share nothing on this cluster"
            if now_policy is None
            else f"the ClusterPolicy: drop --key/--configmap, so the change edits key "
            f"{now_policy[1]} of ConfigMap {now_policy[0]}, which it names now"
        )
    raise ShareRefused(
        f"{edits.objects(state)} changed since kubectl gpu last wrote them (by hand or by "
        "another tool); this change would overwrite that edit; nothing was written:",
        hint="to overwrite it, run the command again with --force; to keep it, " + "; ".join(adopt),
        details=edits.details(state, LAST_WRITTEN),
    )


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
        key = request.key or key_for(state, changes, doc, node, request.resource_name)
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
