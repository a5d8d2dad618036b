"""Before a change deletes or pauses GPU pods of the node side: will they come back?

Owns the first-try check that `share`, `share off`, `share rollback`, `mig apply` and `mig
recover` make before their first write, eviction or delete: for each node they restart the
device plugin on (or pause it, or un-pause it), the DaemonSets of the GPU node side (the device
plugin itself, always; GFD and MPS daemons reading its config, our agent, the GPU Operator's
GFD and MIG manager, wherever their selector puts them on the node) must tolerate every
`NoSchedule`/`NoExecute` taint the node has, and the plugin's must still select the node (with
the labels it will have), and the plugin's must not be mid-rollout (a pod deleted then comes back
at the rollout's pace, with whichever template it has reached). Otherwise the DaemonSet
controller never recreates the pod the change deletes and the node is left with no GPUs
(kubectl_gpu.doctor.daemons says why). A dry run
makes the same check, so it gives the same verdict. `doctor` asks the same module why a plugin
pod is missing. A DaemonSet list the user may not read is no reason to refuse. Must not write.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubectl_gpu import cluster, errors, keys
from kubectl_gpu.doctor import daemons, facts
from kubectl_gpu.sharing import deployment as deployments
from kubectl_gpu.sharing.deployment import Deployment

log = logging.getLogger(__name__)
Json = dict[str, Any]
PLUGIN = "device plugin"
AGENT_APP = "kubectl-gpu-agent"
_OPERATOR_ROLES = {
    "nvidia-device-plugin-daemonset": PLUGIN,
    "gpu-feature-discovery": "GPU feature discovery",
    "nvidia-mig-manager": "MIG manager",
}


class WouldNotComeBack(errors.GpuError):
    """A pod the change deletes or pauses would never be recreated on its node."""


def stack(api: cluster.Api, deployment: Deployment | None) -> list[daemons.DaemonSet]:
    """The GPU node side's DaemonSets: `deployment`'s plugin and companions, our agent, the
    GPU Operator's operands (empty when DaemonSets may not be listed)."""
    try:
        raw = list(api.list(cluster.path("daemonsets")))
    except errors.ClusterError as e:
        if e.status not in (403, 404):
            raise
        log.warning("cannot check that the device plugin comes back: %s", e.message)
        return []
    found = []
    for daemonset in raw:
        role = _role(daemonset, deployment)
        if role:
            found.append(daemons.daemonset_from_dict(daemonset, role, _manager(daemonset)))
    return found


def blockers(
    daemonsets: Sequence[daemons.DaemonSet],
    nodes: Iterable[Mapping[str, Any]],
    labels_after: Mapping[str, Mapping[str, str | None]] | None = None,
    settled: bool = True,
) -> list[daemons.Blocker]:
    """Per raw node (with `labels_after` merged into its labels: None removes one), each
    DaemonSet that would not bring its pod back there. The plugin must select the node; the
    others count only where their selector puts them on it. With `settled` (a change about to
    delete plugin pods), a plugin DaemonSet mid-rollout blocks too."""
    nodes = list(nodes)
    found = []
    for raw in nodes:
        node = _after(facts.node_from_dict(raw), (labels_after or {}))
        for daemonset in daemonsets:
            if daemonset.role != PLUGIN and not daemons.selects(daemonset, node):
                continue  # e.g. a MIG manager on a node without MIG GPUs: not its node
            blocked = daemons.blocker(daemonset, node)
            if blocked is not None:
                found.append(blocked)
    if settled:  # a plugin pod deleted mid-rollout returns at the rollout's pace and template
        names = [str((n.get("metadata") or {}).get("name") or "") for n in nodes]
        found += [
            daemons.Blocker(daemonset, name, (), (), rolling=True)
            for daemonset in daemonsets
            if daemonset.role == PLUGIN and daemonset.rolling
            for name in names
        ]
    return found


def refusal(found: Sequence[daemons.Blocker], what: str) -> WouldNotComeBack | None:
    """The error that stops a change, one line per blocked DaemonSet and node, and the
    toleration to add (None when nothing is blocked). `what` is what the change would do."""
    if not found:
        return None
    if all(b.rolling for b in found):
        return WouldNotComeBack(
            f"{what} now would race the device plugin DaemonSet's own rollout; nothing was "
            "written:",
            hint=f"{fixes(found)}; then run the same command again",
            details=tuple(dict.fromkeys(b.reason() for b in found)),  # one line per DaemonSet
        )
    return WouldNotComeBack(
        f"{what} would leave {_nodes(found)} without it: the DaemonSet controller would not "
        "recreate the pods the change deletes there; nothing was written:",
        hint=f"{fixes(found)}; then run the same command again",
        details=tuple(dict.fromkeys(b.reason() for b in found)),
    )


def fixes(found: Sequence[daemons.Blocker]) -> str:
    """Each DaemonSet's fix once, then each node's taint removal once."""
    tolerations = dict.fromkeys(b.toleration() for b in found if b.toleration())
    removals = dict.fromkeys(b.removal() for b in found if b.removal())
    waits = dict.fromkeys(b.wait() for b in found if b.wait())
    return "; ".join([*tolerations, *waits]) + "".join(f"; or {r}" for r in removals)


def check(
    api: cluster.Api,
    deployment: Deployment | None,
    nodes: Iterable[Mapping[str, Any]],
    what: str,
    labels_after: Mapping[str, Mapping[str, str | None]] | None = None,
) -> None:
    """Raise WouldNotComeBack when a node-side pod the change deletes would not come back."""
    nodes = list(nodes)
    if not nodes:
        return
    error = refusal(blockers(stack(api, deployment), nodes, labels_after), what)
    if error is not None:
        raise error


def per_node(found: Sequence[daemons.Blocker]) -> dict[str, str]:
    """One sentence per blocked node: what keeps which pod away, and what to do."""
    by_node: dict[str, list[daemons.Blocker]] = {}
    for item in found:
        by_node.setdefault(item.node, []).append(item)
    return {
        node: "; ".join(b.reason() for b in items)
        + (
            ""
            if all(b.rolling for b in items)
            else ", so the DaemonSet controller would not recreate the pods the change deletes"
        )
        + ": "
        + fixes(items)
        for node, items in by_node.items()
    }


def raw_nodes(api: cluster.Api, names: Iterable[str]) -> list[Json]:
    """The named nodes as the API returns them (one GET each: constant per node)."""
    return [api.get(cluster.path("nodes", name)) for name in names]


def detected(api: cluster.Api, policies: Sequence[Json]) -> Deployment | None:
    """The device plugin as `share show` finds it (None when none is found)."""
    try:
        daemonsets = list(api.list(cluster.path("daemonsets")))
        return deployments.detect(policies, daemonsets, reading=True)
    except deployments.DeploymentError:
        return None
    except errors.ClusterError as e:
        if e.status not in (403, 404):
            raise
        return None


def _role(daemonset: Mapping[str, Any], deployment: Deployment | None) -> str:
    meta = daemonset.get("metadata") or {}
    name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
    labels = ((daemonset.get("spec") or {}).get("template") or {}).get("metadata") or {}
    labels = labels.get("labels") or {}
    if deployment is not None and namespace == deployment.namespace:
        if name == deployment.daemonset:
            return PLUGIN
        if name in deployment.companions:
            return "GPU feature discovery" if "feature-discovery" in name else "MPS control daemon"
    if labels.get(keys.APP_NAME_LABEL) == AGENT_APP:
        return "kubectl-gpu agent"
    return _OPERATOR_ROLES.get(str(labels.get(keys.APP_LABEL) or ""), "")


def _manager(daemonset: Mapping[str, Any]) -> str:
    meta = daemonset.get("metadata") or {}
    owners = meta.get("ownerReferences") or []
    if any(isinstance(o, Mapping) and o.get("kind") == "ClusterPolicy" for o in owners):
        return "gpu-operator"
    labels = ((daemonset.get("spec") or {}).get("template") or {}).get("metadata") or {}
    if str((labels.get("labels") or {}).get(keys.APP_LABEL) or "") in _OPERATOR_ROLES:
        return "gpu-operator"
    if (meta.get("labels") or {}).get(keys.MANAGED_BY_LABEL) == "Helm":
        return "helm"
    return ""


def _after(node: facts.Node, labels_after: Mapping[str, Mapping[str, str | None]]) -> facts.Node:
    change = labels_after.get(node.name)
    if not change:
        return node
    labels = {**node.labels}
    for key, value in change.items():
        if value is None:
            labels.pop(key, None)
        else:
            labels[key] = value
    return dataclasses.replace(node, labels=labels)


def _nodes(found: Sequence[daemons.Blocker]) -> str:
    names = sorted({b.node for b in found})
    return ("node " if len(names) == 1 else "nodes ") + ", ".join(names)
