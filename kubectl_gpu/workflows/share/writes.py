"""Writing a sharing plan: the ConfigMap, then the ClusterPolicy, then node labels.

Owns turning a plan into objects and requests, in an order that never leaves a node selecting
a missing key: every config text validated with `validation.validate_text` first (nothing is
written when one has an error), the ConfigMap replaced with its resourceVersion as precondition
(`Stale` on a conflict, so the caller re-reads and re-plans) together with the rollback record,
then the ClusterPolicy's `spec.devicePlugin.config`, then the labels. A failure after the first
write says exactly what was written and how to undo it. Client dry runs get the same objects
without a request. Must not decide what to write (the plan does).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from kubectl_gpu import cluster, errors, findings, keys, validation
from kubectl_gpu.findings import Finding
from kubectl_gpu.sharing import rollout
from kubectl_gpu.sharing.rollout.record import MAX_HISTORY, MAX_RECORD_CHARS
from kubectl_gpu.workflows.share.state import Json, Snapshot

ROLLBACK = "kubectl gpu share rollback"

log = logging.getLogger(__name__)


class Stale(Exception):
    """The ConfigMap changed between reading and writing it (409): read again and re-plan."""


def texts(plan: rollout.Plan) -> dict[str, str]:
    """The text to write under each changed key (YAML of the planned config, or kept text).

    Keys keep their order. Comments: the block of comments that opens a key is kept; PyYAML
    has no model of the others (beside or between settings), so they are dropped, and a
    warning says so (the previous text stays in the rollback history).
    """
    import yaml

    rendered = {}
    for change in plan.keys:
        if change.text is not None:
            rendered[change.key] = change.text
        elif change.doc is None:
            rendered[change.key] = ""
        else:
            header, dropped = _comments(change.before or "")
            if dropped:
                log.warning(
                    "key %s: %d comment line(s) inside the config are not kept (only the "
                    "comments above it are); `%s` restores the text as it was",
                    change.key,
                    dropped,
                    ROLLBACK,
                )
            body = yaml.safe_dump(dict(change.doc), sort_keys=False, default_flow_style=False)
            rendered[change.key] = header + body
    return rendered


def _comments(text: str) -> tuple[str, int]:
    """The comment lines that open `text` (kept), and how many other lines hold a comment."""
    lines = text.splitlines(keepends=True)
    opening = 0
    while opening < len(lines) and lines[opening].lstrip().startswith("#"):
        opening += 1
    rest = sum(1 for line in lines[opening:] if "#" in line)  # may overcount a '#' in a value
    return "".join(lines[:opening]), rest


# Deployments whose plugin container has MPS_ROOT in its environment (the GPU Operator, the
# Helm chart, our bundle), so that a config without flags.mpsRoot runs MPS there.
_SETS_MPS_ROOT = ("gpu-operator", "helm", "bundle")


def validate(plan: rollout.Plan, rendered: Mapping[str, str]) -> tuple[Finding, ...]:
    """Every finding about the texts to write; ConfigError when any is an error."""
    found: list[Finding] = []
    for key, text in rendered.items():
        where = f"{plan.namespace}/{plan.configmap}:{key}"
        found += validation.validate_text(text, where, "device-plugin-config").findings
    if plan.deployment.kind in _SETS_MPS_ROOT:  # the warning is about plugins that do not
        found = [f for f in found if f.code != "sharing.mps-root-missing"]
    if findings.has_errors(found):
        bad = sorted({f.file.rsplit(":", 1)[-1] for f in found if f.severity.value == "error"})
        raise errors.ConfigError(
            f"the new config for key(s) {', '.join(bad)} of ConfigMap "
            f"{plan.namespace}/{plan.configmap} would stop the device plugin from starting; "
            "nothing was written",
            hint="fix the findings above (the existing key may already be invalid: "
            "kubectl gpu share show), then run the command again",
            findings=tuple(found),
        )
    return tuple(found)


def configmap_body(
    snapshot: Snapshot, plan: rollout.Plan, rendered: Mapping[str, str], rolling_back: bool = False
) -> Json:
    """The ConfigMap as it will be sent: data updated, the rollback history annotated.

    A change adds its record to the history (RecordTooLarge, before anything is written, when
    the record cannot be kept); a rollback removes the record it restored.
    """
    if snapshot.configmap is not None:
        body = copy.deepcopy(snapshot.configmap)
    else:
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": plan.configmap,
                "namespace": plan.namespace,
                "labels": {keys.MANAGED_BY_LABEL: keys.MANAGED_BY_VALUE},
            },
        }
    body["data"] = {**(body.get("data") or {}), **rendered}
    annotations = body["metadata"].setdefault("annotations", {}) or {}
    existing = snapshot.state.configmap.record
    where = f"ConfigMap {plan.namespace}/{plan.configmap}"
    if rolling_back:
        history = rollout.pop(existing, where)
    else:
        record = dataclasses.replace(plan.record, written=dict(rendered))
        history = rollout.push(existing, record, where)
    if history.dropped:
        log.warning(
            "%s: the rollback history keeps the last %d changes within %d characters; "
            "%d older change(s) can no longer be rolled back",
            where,
            MAX_HISTORY,
            MAX_RECORD_CHARS,
            history.dropped,
        )
    if history.text is None:
        annotations.pop(keys.PREVIOUS_CONFIG_ANNOTATION, None)
    else:
        annotations[keys.PREVIOUS_CONFIG_ANNOTATION] = history.text
    body["metadata"]["annotations"] = annotations
    return body


def write_configmap(api: cluster.Api, plan: rollout.Plan, body: Json, dry_run: bool) -> Json:
    """Create or replace the ConfigMap (resourceVersion as precondition); Stale on 409."""
    try:
        if plan.create:
            url = cluster.path("configmaps", namespace=plan.namespace)
            return api.create(url, body, dry_run=dry_run)
        url = cluster.path("configmaps", plan.configmap, plan.namespace)
        return api.replace(url, body, dry_run=dry_run)
    except errors.ClusterError as e:
        if e.status == 409:
            raise Stale(str(e)) from e
        raise _nothing_written(e, f"write ConfigMap {plan.namespace}/{plan.configmap}") from e


def write_rest(
    api: cluster.Api, snapshot: Snapshot, plan: rollout.Plan, dry_run: bool
) -> list[Json]:
    """After the ConfigMap: the ClusterPolicy, then each node's label; objects as written."""
    written: list[Json] = []
    done: list[str] = [f"ConfigMap {plan.namespace}/{plan.configmap}"]
    if plan.policy is not None:
        url = cluster.path("clusterpolicies", plan.policy.name)
        try:
            written.append(api.patch(url, plan.policy.patch(), dry_run=dry_run))
        except errors.ClusterError as e:
            raise _partial(e, plan, done, f"update ClusterPolicy {plan.policy.name}") from e
        done.append(f"ClusterPolicy {plan.policy.name}")
    for change in plan.labels:
        try:
            written.append(
                api.patch(cluster.path("nodes", change.node), _label_patch(change), dry_run=dry_run)
            )
        except errors.ClusterError as e:
            raise _partial(e, plan, done, f"label node {change.node}") from e
        done.append(f"node {change.node}")
    return written


def preview(snapshot: Snapshot, plan: rollout.Plan, body: Json) -> list[Json]:
    """The objects a client dry run prints: exactly what would be sent, in order."""
    objects = [body]
    if plan.policy is not None and snapshot.cluster_policy is not None:
        objects.append(merge(snapshot.cluster_policy, plan.policy.patch()))
    for change in plan.labels:
        # read from a LIST, whose items a real API server sends without apiVersion and kind
        node = {"apiVersion": "v1", "kind": "Node", **snapshot.nodes[change.node]}
        objects.append(merge(node, _label_patch(change)))
    return objects


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch, as the API server applies it."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = copy.deepcopy(dict(target)) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge(result.get(key), value)
    return result


def _label_patch(change: rollout.LabelChange) -> Json:
    return {"metadata": {"labels": {keys.DEVICE_PLUGIN_CONFIG_LABEL: change.after}}}


def _nothing_written(e: errors.ClusterError, action: str) -> errors.ClusterError:
    return errors.ClusterError(
        f"cannot {action}: {e.message}; nothing was written", hint=e.hint, status=e.status
    )


def _partial(
    e: errors.ClusterError, plan: rollout.Plan, done: list[str], action: str
) -> errors.ClusterError:
    message = f"wrote {', '.join(done)}, then failed to {action}: {e.message}."
    if plan.labels:
        labelled = [c.node for c in plan.labels if f"node {c.node}" in done]
        kept = [c.node for c in plan.labels if c.node not in labelled]
        message += (
            f" Nodes that keep their previous key: {', '.join(kept) or 'none'}; relabelled "
            f"(config-manager reloads on the label change): {', '.join(labelled) or 'none'}."
        )
    message += " No plugin pod was restarted"
    undo = f"undo with `{ROLLBACK}`, or fix this and run the command again"
    hint = f"{e.hint}; {undo}" if e.hint else undo
    return errors.ClusterError(message, hint=hint, status=e.status)
