"""What the planner is told about the cluster: the plugin's deployment, its ConfigMap, GPU nodes.

Owns the frozen inputs of a sharing change (`ConfigMapState`, `ClusterState`), which key each
node reads before the change, and `ShareRefused`, the error for a change that would break
something. Must not read the cluster (the workflow builds these from API objects) nor parse
text (the workflow parses each key; a key that did not parse has no entry in `docs`). Pure:
standard library and the package's domain modules only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kubectl_gpu import errors
from kubectl_gpu.sharing import deployment as deployments
from kubectl_gpu.sharing.deployment import Deployment
from kubectl_gpu.sharing.rollout import selection
from kubectl_gpu.sharing.rollout.nodes import GpuNode
from kubectl_gpu.sharing.rollout.selection import Selection

Doc = Mapping[str, Any] | None  # a parsed config; None is an empty file (the defaults)


class ShareRefused(errors.GpuError):
    """The change would leave a node without a working config; nothing was written."""


@dataclasses.dataclass(frozen=True)
class ConfigMapState:
    """The device plugin's ConfigMap as read: texts, parsed configs, the rollback record."""

    namespace: str
    name: str
    exists: bool = False
    texts: Mapping[str, str] = dataclasses.field(default_factory=dict)
    docs: Mapping[str, Doc] = dataclasses.field(default_factory=dict)  # keys that parsed
    record: str = ""  # the previous-config annotation; "" when there is none
    problems: Mapping[str, str] = dataclasses.field(default_factory=dict)  # key -> first error

    def doc(self, key: str) -> Doc:
        """The parsed config under `key` ({} for the empty selection), or ShareRefused."""
        if key == selection.EMPTY:
            return {}
        if key not in self.docs:
            raise ShareRefused(
                f"key {key!r} of ConfigMap {self.namespace}/{self.name} is not a readable config",
                hint=f"fix it first (kubectl get cm -n {self.namespace} {self.name} -o yaml | "
                "kubectl gpu validate -f -)",
            )
        return self.docs[key]


@dataclasses.dataclass(frozen=True)
class ClusterState:
    """Everything a sharing change is planned from."""

    deployment: Deployment
    configmap: ConfigMapState
    nodes: tuple[GpuNode, ...]  # every GPU node, sorted by name

    def node(self, name: str) -> GpuNode | None:
        return next((n for n in self.nodes if n.name == name), None)

    def selection_before(self, node: GpuNode) -> Selection:
        """The key `node` reads now; `unset` when the plugin reads no config of ours yet."""
        deployment = self.deployment
        if not deployment.reads_configmap:
            return Selection(selection.EMPTY, "unset")
        return selection.select(
            node.labels,
            self.configmap.texts.keys(),
            deployment.default_key,
            deployment.fallback_strategies,
        )

    def doc_before(self, node: GpuNode) -> Doc | Unknown:
        """The config `node` reads now, or UNKNOWN (a broken selection, an unreadable key)."""
        chosen = self.selection_before(node)
        if not chosen.ok or chosen.key not in (*self.configmap.docs, selection.EMPTY):
            return UNKNOWN
        if chosen.how == "unset" and self.deployment.policy_config is not None:
            return UNKNOWN  # the operator points the plugin at another ConfigMap
        return self.configmap.doc(chosen.key)

    def mig_strategy(self, node: GpuNode) -> tuple[str | None, str]:
        """The MIG strategy the plugin serving `node` runs with (None: cannot be known), and
        where it comes from. An env var on the plugin container wins over the file
        (docs/upstream-facts.md P1.1): the Helm chart's `migStrategy` and the GPU Operator's
        `spec.mig.strategy` are rendered as MIG_STRATEGY; otherwise `flags.migStrategy` of the key
        the node reads, else `none`."""
        plugin = f"DaemonSet {self.deployment.namespace}/{self.deployment.daemonset}"
        forced = deployments.effective_flag(self.deployment, ("migStrategy",))
        if forced is not None:
            return forced, f"env MIG_STRATEGY={forced} on {plugin}"
        doc = self.doc_before(node)
        if isinstance(doc, Unknown):
            return None, f"the config node {node.name} reads cannot be known"
        key = self.selection_before(node).key
        configured = key != selection.EMPTY and self.deployment.configurable
        where = (
            f"key {key!r} of ConfigMap {self.configmap.namespace}/{self.configmap.name}"
            if configured
            else "no config file"
        )
        strategy = flag_strategy(doc)
        if strategy is not None:
            return strategy, f"flags.migStrategy={strategy} in {where}"
        unset = f"no flags.migStrategy in {where}" if configured else where
        default = f"no MIG_STRATEGY on {plugin}, {unset}"
        return "none", f"the plugin's default: {default}"


def flag_strategy(doc: Doc) -> str | None:
    """`flags.migStrategy` of a config (None when it sets none)."""
    flags = (doc or {}).get("flags")
    value = flags.get("migStrategy") if isinstance(flags, Mapping) else None
    return None if value is None else str(value)


class Unknown:
    """The marker for a config that cannot be known."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = Unknown()
