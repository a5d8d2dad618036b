"""The device plugin's pods and their companions (GFD, MPS daemons) by node, as a rollout sees
them: one LIST of the plugin's namespace, then one watch of it (`workflows.watched`).

Owns which pods of the namespace a rollout keeps and how they are told apart: the plugin's by
the DaemonSet's selector and the plugin container (docs/upstream-facts.md P6), companions by
the DaemonSet that owns them; each kept with only the fields the rollout reads, so that 5,000
nodes' pods cost a few MiB. Pods being deleted are not a node's plugin. Must not delete
anything (restarts does) nor judge a pod's state (sharing.rollout.status does).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from kubectl_gpu import cluster
from kubectl_gpu.sharing import deployment as deployments
from kubectl_gpu.sharing.deployment import Deployment
from kubectl_gpu.workflows.waiting import Timing
from kubectl_gpu.workflows.watched import Watched, picked

Json = dict[str, Any]
_KEPT = {
    "metadata": ("name", "namespace", "uid", "labels", "ownerReferences", "deletionTimestamp"),
    "spec": ("nodeName",),
    "status": (),
}
_ROLE, _PLUGIN, _COMPANION = "role", "plugin", "companion"  # a kept pod's, beside its fields


class PluginPods:
    """The plugin's namespace, kept current while a rollout runs."""

    def __init__(self, api: cluster.Api, deployment: Deployment, timing: Timing) -> None:
        self.deployment = deployment
        url = cluster.path("pods", namespace=deployment.namespace)
        self.watched = Watched(api, url, self._keep, timing, index=_node)

    def _keep(self, pod: Json) -> Json | None:
        """The pod trimmed to what the rollout reads, or None for pods of other workloads."""
        meta = pod.get("metadata") or {}
        owners = {
            str(o.get("name")) for o in meta.get("ownerReferences") or [] if isinstance(o, dict)
        }
        labels = meta.get("labels") or {}
        selected = all(labels.get(k) == v for k, v in self.deployment.pod_selector)
        if not (selected or owners & {self.deployment.daemonset, *self.deployment.companions}):
            return None
        kept = picked(pod, _KEPT)
        containers = (pod.get("spec") or {}).get("containers") or []
        kept.setdefault("spec", {})["containers"] = [
            {"name": c.get("name")} for c in containers if isinstance(c, dict)
        ]
        # told apart once per change of the pod (in the watch's thread), not at every look
        if selected and deployments.is_plugin_pod(self.deployment, pod):
            kept[_ROLE] = _PLUGIN
        elif owners & set(self.deployment.companions):
            kept[_ROLE] = _COMPANION
        return kept

    def start(self) -> PluginPods:
        self.watched.start()
        return self

    def close(self) -> None:
        self.watched.close()

    def __enter__(self) -> PluginPods:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.close()

    def uids(self, nodes: Collection[str]) -> dict[str, str]:
        """The uid of the live plugin pod on each of `nodes`, as known now."""
        return uids(self.plugins(nodes, look=False), nodes)

    def plugins(self, nodes: Collection[str], *, look: bool = True) -> dict[str, Json]:
        """The live plugin pod on each of `nodes` (`look`: a fresh look, one LIST when
        polling; else what is known)."""
        if look:
            self.watched.refresh()
        return {
            _node(pod): pod
            for pod in self.watched.items_at(nodes)
            if pod.get(_ROLE) == _PLUGIN and not pod["metadata"].get("deletionTimestamp")
        }

    def companions(self, nodes: Collection[str]) -> list[Json]:
        """GFD / MPS-daemon pods on `nodes` that read the plugin's config (known now)."""
        return [pod for pod in self.watched.items_at(nodes) if pod.get(_ROLE) == _COMPANION]

    def pause(self, seconds: float) -> None:
        self.watched.pause(seconds)


def uids(plugins: Mapping[str, Json], nodes: Collection[str]) -> dict[str, str]:
    """The uid of the plugin pod (of `plugins`, by node) on each of `nodes` that has one."""
    return {
        node: str((pod.get("metadata") or {}).get("uid", ""))
        for node, pod in plugins.items()
        if node in nodes
    }


def _node(pod: Json) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")
