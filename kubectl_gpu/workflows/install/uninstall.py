"""Removing the bundle: every object, last applied first, then our keys on the nodes.

Owns `uninstall` (delete in reverse order; once the agent pods are gone, take our
`kubectl-gpu.io/` labels and annotations off the nodes, and with our device plugin gone the
per-node config labels `share` set; a plugin an agent left paused gets its label back). Must
not restore a replaced plugin (`replaced.restore` does, called by the CLI after this).
"""

from __future__ import annotations

import logging

from kubectl_gpu import bundle, cluster, keys
from kubectl_gpu.workflows.install.apply import delete
from kubectl_gpu.workflows.install.objects import DryRun, Json, Outcome, read
from kubectl_gpu.workflows.waiting import Timing

log = logging.getLogger(__name__)


def uninstall(
    api: cluster.Api, objects: list[Json], dry_run: DryRun = "none", *, clean_nodes: bool = True
) -> list[Outcome]:
    """Delete every object, last applied first; then our keys on the nodes."""
    outcomes = []
    for obj in reversed(objects):
        kind, namespace, name = bundle.identity(obj)
        if read(api, obj) is None:
            outcomes.append(Outcome(kind, namespace, name, "not found"))
            continue
        if dry_run != "client":
            delete(api, obj, dry_run == "server")
        outcomes.append(Outcome(kind, namespace, name, "deleted"))
    if not clean_nodes:
        return outcomes
    if dry_run == "none" and any(_is_our_agent(obj) for obj in objects):
        _await_agents_gone(api)
    plugin_gone = any(_is_our_plugin(obj) for obj in objects)
    return outcomes + _clean_nodes(api, dry_run, plugin_gone)


AGENTS_GONE_TIMEOUT = 60.0


def _is_our_agent(obj: Json) -> bool:
    kind, _, name = bundle.identity(obj)
    return kind == "DaemonSet" and name == bundle.AGENT


def _await_agents_gone(api: cluster.Api, timing: Timing | None = None) -> None:
    """A running agent watches its Node: our keys removed under it are a change it acts on,
    writing some back. So the nodes are cleaned once the agent pods are gone (a bounded wait:
    after it, they are cleaned anyway, with a warning)."""
    deadline = (timing or Timing()).deadline(AGENTS_GONE_TIMEOUT)
    selector = f"{keys.APP_NAME_LABEL}={bundle.AGENT}"
    while next(api.list(cluster.path("pods"), label_selector=selector), None) is not None:
        if deadline.passed:
            log.warning(
                "agent pods still running after %gs; removing our keys from the nodes anyway "
                "(an agent may write some back before it stops)",
                AGENTS_GONE_TIMEOUT,
            )
            return
        deadline.pause()


def _is_our_plugin(obj: Json) -> bool:
    kind, _, name = bundle.identity(obj)
    return kind == "DaemonSet" and name == bundle.DEVICE_PLUGIN


def _ours(key: str, value: object, plugin_gone: bool) -> bool:
    if key.startswith(keys.PREFIX):
        return True
    return (
        plugin_gone
        and key == keys.DEVICE_PLUGIN_CONFIG_LABEL
        and str(value).startswith(keys.PER_NODE_KEY_PREFIX)
    )


def _clean_nodes(api: cluster.Api, dry_run: DryRun, plugin_gone: bool) -> list[Outcome]:
    """Remove the agent's `kubectl-gpu.io/` labels and annotations: nothing reads them now.
    With our device plugin gone, so is its ConfigMap: the per-node config labels `share`
    set (`nvidia.com/device-plugin.config=kubectl-gpu-…`) would name keys that no longer exist.
    Beside another plugin they stay: that plugin's ConfigMap still holds the keys. A device
    plugin an agent left paused (it was stopped mid-change) gets its recorded label back."""
    outcomes = []
    for node in api.list(cluster.path("nodes")):
        meta = node.get("metadata") or {}
        patch: dict[str, dict[str, str | None]] = {
            field: {k: None for k, v in (meta.get(field) or {}).items() if _ours(k, v, plugin_gone)}
            for field in ("labels", "annotations")
        }
        paused = (meta.get("annotations") or {}).get(keys.MIG_PAUSED_PLUGIN_ANNOTATION)
        if paused is not None:
            patch["labels"][keys.DEPLOY_DEVICE_PLUGIN_LABEL] = paused or "true"
        patch = {field: keys_ for field, keys_ in patch.items() if keys_}
        if not patch:
            continue
        if dry_run != "client":
            url = cluster.path("nodes", str(meta["name"]))
            api.patch(url, {"metadata": patch}, dry_run=dry_run == "server")
        outcomes.append(Outcome("Node", "", str(meta["name"]), "cleaned"))
    return outcomes
