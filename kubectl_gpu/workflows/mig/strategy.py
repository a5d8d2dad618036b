"""The MIG strategy of the device plugin that serves each node, as that plugin reads it.

Owns reading what `mig apply`, `mig validate --node` and `mig plan --node` check a config
against, so that the three (and a dry run) give one verdict: the plugin's env MIG_STRATEGY (the
Helm chart's `migStrategy`, the GPU Operator's `spec.mig.strategy`), else `flags.migStrategy` of
the config key the node selects, else the plugin's default `none` (docs/upstream-facts.md
P1.1, P1.3). Where no device plugin is found (or the user may not read it), GFD's
`nvidia.com/mig.strategy` label stands in (absent: unknown, and no strategy is checked). Must
not write anything nor decide whether a config fits (mig.verdicts does).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping

from kubectl_gpu import cluster, keys
from kubectl_gpu.errors import ClusterError
from kubectl_gpu.sharing import deployment as deployments
from kubectl_gpu.sharing.deployment import DeploymentError, Overrides
from kubectl_gpu.workflows.share import state as sharestate

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Served:
    """One node's MIG strategy (None: unknown) and where it was read, for messages."""

    strategy: str | None
    source: str
    fix: str = ""  # how to change it, where the deployment says

    def explain(self) -> str:
        """`(migStrategy X: source; to change it: fix)` for a refusal's reason."""
        fix = f"; to change it: {self.fix}" if self.fix else ""
        return f"(migStrategy {self.strategy}: {self.source}{fix})"


def read(api: cluster.Api, labels: Mapping[str, Mapping[str, str]]) -> dict[str, Served]:
    """Each node's strategy; `labels`: the nodes asked about, with their labels."""
    try:
        snapshot = sharestate.read(api, Overrides(), reading=True)
    except (DeploymentError, ClusterError) as e:
        if isinstance(e, ClusterError) and e.status != 403:
            raise
        # no plugin found, or the user may not read it: GFD's view is the best there is
        log.info("reading the MIG strategy from GFD's labels: %s", e.message)
        return {name: _from_gfd(found) for name, found in labels.items()}
    state = snapshot.state
    served = {}
    for name, found in labels.items():
        node = state.node(name)
        strategy, source = state.mig_strategy(node) if node else (None, "")
        if strategy is None:
            served[name] = _from_gfd(found)
        else:
            fix = "" if strategy == "mixed" else _fix(state.deployment, source)
            served[name] = Served(strategy, source, fix)  # mixed: nothing better to advise
    return served


def _from_gfd(labels: Mapping[str, str]) -> Served:
    value = labels.get(keys.MIG_STRATEGY_LABEL) or None
    return Served(value, f"GFD's {keys.MIG_STRATEGY_LABEL} label" if value else "unknown")


def _fix(deployment: deployments.Deployment, source: str) -> str:
    """Where the strategy is changed for this deployment."""
    if source.startswith("flags.migStrategy"):
        return "set flags.migStrategy: mixed in that key"
    if deployment.kind == "gpu-operator":
        return (
            f"kubectl patch clusterpolicies.nvidia.com {deployment.cluster_policy} --type merge "
            '-p \'{"spec":{"mig":{"strategy":"mixed"}}}\''
        )
    if deployment.kind == "helm":
        release = deployment.daemonset.removesuffix("-nvidia-device-plugin")
        return (
            f"helm upgrade {release} nvdp/nvidia-device-plugin -n {deployment.namespace} "
            "--reuse-values --set migStrategy=mixed"
        )
    return f"set env MIG_STRATEGY=mixed on DaemonSet {deployment.namespace}/{deployment.daemonset}"
