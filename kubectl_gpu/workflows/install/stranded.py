"""Before `uninstall`: which nodes keep MIG-enabled GPUs, and can the plugin left serve them?

Owns the check `uninstall` makes before its first delete. A `mig apply` leaves GPUs in MIG
mode; uninstalling takes the agent (nothing of kubectl gpu can turn MIG off afterwards) and,
for the bundle, our device plugin, and gives back the plugin `install --replace-plugin` kept.
The plugin left or restored reads its MIG strategy as the plugin does (env MIG_STRATEGY, else
`flags.migStrategy` of the key a node selects, else `none`: docs/first-try-safety.md). Under
`none` it advertises MIG-enabled GPUs as whole `nvidia.com/gpu` that CUDA cannot use, so that
case is refused (unless --force), naming the nodes, the plugin and what to do; under `mixed`
or `single`, or with no plugin left at all, the nodes are named in a warning. A node counts as
MIG-enabled when its agent's GPUNodeReport says so, its capacity holds `nvidia.com/mig-*`, or
GFD's product label carries `-MIG-`. Must not write, and must not import the sharing or MIG
workflows (an import-linter contract): the domain's deployment detection is enough.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubectl_gpu import bundle, cluster, documents, errors, findings, keys
from kubectl_gpu.gpumap import report
from kubectl_gpu.sharing import deployment as deployments
from kubectl_gpu.sharing.rollout.state import flag_strategy
from kubectl_gpu.workflows import agentreports
from kubectl_gpu.workflows.policies import cluster_policies

log = logging.getLogger(__name__)
Json = dict[str, Any]


class Stranded(errors.GpuError):
    """Uninstalling would leave MIG-enabled GPUs to a plugin that cannot serve them."""


@dataclasses.dataclass(frozen=True)
class Left:
    """The device plugin serving the GPU nodes after the uninstall, and its MIG strategy."""

    plugin: str  # described for the user; "" when no device plugin is left
    strategy: str  # none | single | mixed
    source: str  # where the strategy is read


def check(api: cluster.Api, objects: Sequence[Json], kept: Sequence[Json], force: bool) -> None:
    """Refuse (Stranded) an uninstall that would leave MIG-enabled GPUs under a plugin with
    MIG strategy `none`; warn where they are left to another strategy or to no plugin."""
    nodes = mig_enabled(api)
    if not nodes:
        return
    left = plugin_left(api, objects, kept)
    names = ", ".join(nodes)
    turn_off = f"kubectl gpu mig apply -f FILE -c all-disabled --node {','.join(nodes)} --wait"
    if not left.plugin:
        log.warning(
            "node(s) %s keep MIG-enabled GPUs and no device plugin is left to serve them; to "
            "turn MIG off, run `%s` before uninstalling",
            names,
            turn_off,
        )
        return
    if left.strategy != "none":
        log.warning(
            "node(s) %s keep MIG-enabled GPUs; %s serves them with migStrategy %s (%s)",
            names, left.plugin, left.strategy, left.source,
        )  # fmt: skip
        return
    message = (
        f"node(s) {names} keep MIG-enabled GPUs, and after the uninstall {left.plugin} would "
        f"serve them with migStrategy none ({left.source}): it advertises them as whole "
        "nvidia.com/gpu that CUDA cannot use, and with the agent gone kubectl gpu can no "
        "longer turn MIG off"
    )
    if force:
        log.warning("%s (--force: uninstalling anyway)", message)
        return
    raise Stranded(
        f"{message}; nothing was deleted",
        hint=f"turn MIG off first: {turn_off}; or give that plugin migStrategy mixed; or pass "
        "--force to uninstall anyway",
    )


def mig_enabled(api: cluster.Api) -> list[str]:
    """The nodes with a MIG-enabled GPU, as reports, capacity or GFD's labels tell."""
    found = {
        str((n.get("metadata") or {}).get("name") or "")
        for n in api.list(cluster.path("nodes"))
        if _mig_node(n)
    }
    found |= set(_reported(api))
    return sorted(n for n in found if n)


def plugin_left(api: cluster.Api, objects: Sequence[Json], kept: Sequence[Json]) -> Left:
    """The device plugin that serves GPUs once `objects` are deleted and `kept` restored."""
    ours = {bundle.identity(o) for o in objects}
    live = [
        d
        for d in api.list(cluster.path("daemonsets"))
        if bundle.identity({**d, "kind": "DaemonSet"}) not in ours
    ]
    try:
        found = deployments.detect(cluster_policies(api), [*live, *kept], reading=True)
    except deployments.DeploymentError:
        return Left("", "none", "")
    strategy, source = _strategy(api, found)
    plugin = f"{deployments.TITLES[found.kind]} (DaemonSet {found.namespace}/{found.daemonset})"
    return Left(plugin, strategy, source)


def _strategy(api: cluster.Api, found: deployments.Deployment) -> tuple[str, str]:
    forced = deployments.effective_flag(found, ("migStrategy",))
    if forced is not None:
        return forced, f"env MIG_STRATEGY on container {found.container}"
    if not found.configurable or not found.default_key:
        return "none", "the plugin's default"
    try:
        raw = api.get(cluster.path("configmaps", found.configmap, found.namespace))
    except errors.ClusterError as e:
        if e.status not in (403, 404):
            raise
        return "none", "the plugin's default (its ConfigMap cannot be read)"
    text = (raw.get("data") or {}).get(found.default_key)
    where = f"key {found.default_key} of ConfigMap {found.namespace}/{found.configmap}"
    strategy = _flag(text, where) if isinstance(text, str) else None
    if strategy is None:
        return "none", f"the plugin's default ({where} sets none)"
    return strategy, f"flags.migStrategy in {where}"


def _flag(text: str, where: str) -> str | None:
    loaded, found = documents.load_documents(text, where)
    if findings.has_errors(found) or len(loaded) != 1 or not isinstance(loaded[0].data, dict):
        return None
    return flag_strategy(loaded[0].data)


def _mig_node(node: Mapping[str, Any]) -> bool:
    meta, status = node.get("metadata") or {}, node.get("status") or {}
    capacity = status.get("capacity") or {}
    if any(
        str(r).startswith(keys.MIG_RESOURCE_PREFIX) and str(n) not in ("0", "")
        for r, n in capacity.items()
    ):
        return True
    return "-MIG-" in str((meta.get("labels") or {}).get(keys.GPU_PRODUCT_LABEL, ""))


def _reported(api: cluster.Api) -> Iterable[str]:
    return [
        node
        for node, node_report in agentreports.read_all(api).items()
        if any(g.mig_mode == report.MIG_ENABLED for g in node_report.gpus)
    ]
