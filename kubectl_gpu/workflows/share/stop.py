"""What a `share` interrupted before its rollout (Ctrl-C, SIGTERM, the terminal closing) left
behind, and what to do about it.

Owns telling, after the fact and from the cluster itself, which of the change's writes landed:
the ConfigMap (its data and rollback history are exactly the body sent), then the
ClusterPolicy's config and each node's label; and the nodes `--drain` cordoned for it. When
nothing landed, the advice says so and warns off `share rollback`, which would undo the change
before, one this run never made. Must not write anything.
"""

from __future__ import annotations

from kubectl_gpu import cluster, errors, keys
from kubectl_gpu.sharing import rollout
from kubectl_gpu.workflows import drain
from kubectl_gpu.workflows.share.drain import CHANGE
from kubectl_gpu.workflows.share.state import Json
from kubectl_gpu.workflows.share.writes import ROLLBACK


def before_rollout(
    api: cluster.Api, attempt: tuple[rollout.Plan, Json] | None, cause: BaseException
) -> errors.GpuError:
    """The error for an interruption before any plugin was restarted."""
    try:
        landed = _landed(api, *attempt) if attempt else []
        cordoned = _cordoned(api)
    except errors.ClusterError as e:
        error = errors.GpuError(
            f"share was interrupted; what it wrote cannot be read now ({e.message})",
            hint="`kubectl gpu share show` shows what each node reads; the ConfigMap's "
            f"{keys.PREVIOUS_CONFIG_ANNOTATION} annotation lists the changes `{ROLLBACK}` undoes",
        )
        error.exit_code = errors.interrupted_code(cause)
        return error
    drained = (
        f"; --drain cordoned {', '.join(cordoned)} (run the same command again to go on, or "
        f"`kubectl gpu mig recover NODE --force` to give a node back)"
        if cordoned
        else ""
    )
    if landed:
        message = (
            f"share was interrupted after writing {', '.join(landed)}; no device plugin was "
            f"restarted{drained}"
        )
        hint = (
            "to finish, run the same command again; to undo, run "
            f"`{ROLLBACK}`; `kubectl gpu share show` shows what each node reads now"
        )
    else:
        message = f"share was interrupted before it wrote anything{drained}"
        hint = (
            f"the config is as it was: do not run `{ROLLBACK}` for this, it would undo the "
            "change before, which this run never made; run the command again to make it"
        )
    error = errors.GpuError(message, hint=hint)
    error.exit_code = errors.interrupted_code(cause)
    return error


def _landed(api: cluster.Api, plan: rollout.Plan, body: Json) -> list[str]:
    """The writes of this change that the cluster holds now, in the order they are made."""
    url = cluster.path("configmaps", plan.configmap, plan.namespace)
    try:
        now = api.get(url)
    except errors.ClusterError as e:
        if e.status == 404:
            return []
        raise
    ours = (body["metadata"].get("annotations") or {}).get(keys.PREVIOUS_CONFIG_ANNOTATION)
    theirs = ((now.get("metadata") or {}).get("annotations") or {}).get(
        keys.PREVIOUS_CONFIG_ANNOTATION
    )
    if now.get("data") != body.get("data") or theirs != ours:
        return []
    landed = [f"ConfigMap {plan.namespace}/{plan.configmap}"]
    if plan.policy is not None:
        policy = api.get(cluster.path("clusterpolicies", plan.policy.name))
        config = ((policy.get("spec") or {}).get("devicePlugin") or {}).get("config") or {}
        if plan.policy.after == (config.get("name"), config.get("default")):
            landed.append(f"ClusterPolicy {plan.policy.name}")
    for change in plan.labels:
        node = api.get(cluster.path("nodes", change.node))
        labels = (node.get("metadata") or {}).get("labels") or {}
        if labels.get(keys.DEVICE_PLUGIN_CONFIG_LABEL) == change.after:
            landed.append(f"node {change.node}'s {keys.DEVICE_PLUGIN_CONFIG_LABEL} label")
    return landed


def _cordoned(api: cluster.Api) -> list[str]:
    """Nodes a share's --drain holds (its record on the Node names the change)."""
    return sorted(
        str(n["metadata"]["name"])
        for n in api.list(cluster.path("nodes"))
        if drain.record_of(n).get("change") == CHANGE
    )
