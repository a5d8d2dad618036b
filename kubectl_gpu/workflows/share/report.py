"""The machine-readable and diff forms of `kubectl gpu share` results.

Owns the documents `-o json|yaml` prints (schemas/share-result.v1.json: `ShareResult` for a
share, off or rollback, `ShareStatus` for `share show`) and the unified diff `--diff` prints
(ConfigMap keys, node labels, the ClusterPolicy's config). Must not print anything: the CLI
renders what these return.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

from kubectl_gpu import keys
from kubectl_gpu.keys import API_VERSION as API_VERSION  # one definition, in keys
from kubectl_gpu.sharing import rollout
from kubectl_gpu.sharing.deployment import Deployment
from kubectl_gpu.workflows.share.results import NodeResult, ShareResult
from kubectl_gpu.workflows.share.show import Status


def result_document(result: ShareResult) -> dict[str, Any]:
    """A share/off/rollback result as schemas/share-result.v1.json describes it."""
    plan = result.plan
    return {
        "apiVersion": API_VERSION,
        "kind": "ShareResult",
        "action": result.action,
        "dryRun": "client" if result.options.diff else result.options.dry_run,
        "succeeded": not result.failed,
        "deployment": deployment_document(plan.deployment),
        "configMap": {"namespace": plan.namespace, "name": plan.configmap, "created": plan.create},
        "changes": {
            "keys": [
                {"key": c.key, "before": c.before, "after": result.texts[c.key]} for c in plan.keys
            ],
            "labels": [{"node": c.node, "before": c.before, "after": c.after} for c in plan.labels],
            "clusterPolicy": _policy(plan.policy),
        },
        "nodes": [node_document(n) for n in result.nodes],
        "notes": list(plan.notes),
        "warnings": [f.to_dict() for f in result.warnings],
        "preview": result.preview.to_dict() if result.preview else None,
    }


def node_document(row: NodeResult) -> dict[str, Any]:
    """One result row, camelCase like Kubernetes."""
    return {
        "node": row.node,
        "key": row.key,
        "strategy": row.strategy,
        "replicas": row.replicas,
        "resource": row.resource,
        "gpus": row.gpus,
        "before": row.before,
        "expected": row.expected,
        "after": row.after,
        "pluginPod": row.plugin_pod,
        "result": row.result,
        "seconds": row.seconds,
        "message": row.message,
    }


def status_document(status: Status) -> dict[str, Any]:
    """`share show` as schemas/share-result.v1.json describes it."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ShareStatus",
        "deployment": deployment_document(status.deployment),
        "configMap": {
            "namespace": status.configmap.namespace,
            "name": status.configmap.name,
            "exists": status.configmap.exists,
            "keys": sorted(status.configmap.texts),
        },
        "nodes": [_status_row(r) for r in status.nodes],
    }


def deployment_document(deployment: Deployment) -> dict[str, Any]:
    return {
        "kind": deployment.kind,
        "namespace": deployment.namespace,
        "daemonSet": deployment.daemonset,
        "podSelector": deployment.selector,
        "container": deployment.container,
        "configMap": deployment.configmap,
        "defaultKey": deployment.default_key,
        "fallbackStrategies": list(deployment.fallback_strategies),
        "clusterPolicy": deployment.cluster_policy or None,
    }


def diff(result: ShareResult) -> str:
    """A unified diff of the keys written, then the label and ClusterPolicy changes."""
    plan = result.plan
    lines: list[str] = []
    where = f"configmap/{plan.namespace}/{plan.configmap}"
    for change in plan.keys:
        before = (change.before or "").splitlines(keepends=True)
        after = result.texts[change.key].splitlines(keepends=True)
        old = f"a/{where}/data/{change.key}" if change.before is not None else "/dev/null"
        lines += _ensure_newlines(
            difflib.unified_diff(before, after, old, f"b/{where}/data/{change.key}")
        )
    for label in plan.labels:
        lines.append(f"--- a/node/{label.node}\n+++ b/node/{label.node}\n")
        if label.before is not None:
            lines.append(f"-  {keys.DEVICE_PLUGIN_CONFIG_LABEL}: {label.before}\n")
        if label.after is not None:
            lines.append(f"+  {keys.DEVICE_PLUGIN_CONFIG_LABEL}: {label.after}\n")
    if plan.policy is not None:
        name = plan.policy.name
        lines.append(f"--- a/clusterpolicy/{name}\n+++ b/clusterpolicy/{name}\n")
        lines.append(f"-  spec.devicePlugin.config: {_config_text(plan.policy.before)}\n")
        lines.append(f"+  spec.devicePlugin.config: {_config_text(plan.policy.after)}\n")
    return "".join(lines)


def _ensure_newlines(lines: Any) -> list[str]:
    return [line if line.endswith("\n") else line + "\n" for line in lines]


def _config_text(config: tuple[str, str] | None) -> str:
    return "null" if config is None else f"{{name: {config[0]}, default: {config[1]!r}}}"


def _policy(change: rollout.PolicyChange | None) -> dict[str, Any] | None:
    if change is None:
        return None

    def config(value: tuple[str, str] | None) -> dict[str, str] | None:
        return None if value is None else {"name": value[0], "default": value[1]}

    return {"name": change.name, "before": config(change.before), "after": config(change.after)}


def _status_row(row: rollout.NodeStatus) -> dict[str, Any]:
    names = {
        "selected_by": "selectedBy",
        "in_use": "inUse",
        "plugin_pod": "pluginPod",
        "plugin_status": "pluginStatus",
        "config_error": "configError",
    }
    document = {names.get(k, k): v for k, v in dataclasses.asdict(row).items()}
    document["problems"] = list(row.problems)
    return document
