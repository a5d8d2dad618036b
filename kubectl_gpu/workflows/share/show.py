"""`kubectl gpu share show`: how each GPU node shares its GPUs now, read and never changed.

Owns the reads behind the survey (the deployment and its ConfigMap through `state`, the plugin
pod per node, the replicas pods hold) and the scoping to `--node` / `-l`. Doctor reads the
cluster's sharing through this module, so it must never write nor import the rollout's
writing steps (an import-linter contract keeps it so).
"""

from __future__ import annotations

import dataclasses

from kubectl_gpu import cluster
from kubectl_gpu.sharing import names, rollout
from kubectl_gpu.sharing.deployment import Deployment, Overrides
from kubectl_gpu.workflows.share import state as sharestate
from kubectl_gpu.workflows.share.options import Options


@dataclasses.dataclass(frozen=True)
class Status:
    """`share show`: the deployment found and a row per GPU node."""

    deployment: Deployment
    configmap: rollout.ConfigMapState
    nodes: tuple[rollout.NodeStatus, ...]


def show(
    api: cluster.Api,
    options: Options,
    resource: str | None = None,
    nodes: tuple[str, ...] = (),
) -> Status:
    """Each GPU node's selected key, sharing, capacity, plugin pod and mismatches, for
    `resource` (None: the one each node's config shares)."""
    overrides = Overrides(options.namespace, options.configmap)
    snapshot = sharestate.read(api, overrides, reading=True)
    state = snapshot.state
    deployment = state.deployment
    pods = {
        node: rollout.PluginPod.from_dict(pod, deployment.container)
        for node, pod in sharestate.plugin_pods(api, deployment).items()
    }
    shown = names.normalise_resource_name(resource) if resource else None
    rows = rollout.survey(state, pods, sharestate.replicas_in_use(api), shown)
    if options.selector or nodes:
        wanted = set(sharestate.node_names(api, nodes, options.selector))
        rows = tuple(r for r in rows if r.node in wanted)
    return Status(deployment, state.configmap, rows)
