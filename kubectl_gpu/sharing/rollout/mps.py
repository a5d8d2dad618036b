"""Whether a node can run the MPS config a sharing change gives it.

Owns the refusals that depend on the node and the strategy the plugin will run with: MIG
enabled on the node, `migStrategy: mixed` (from the key or forced by the plugin container's
env, which wins over the file, docs/upstream-facts.md P1.1), and the client cap of GPUs below
compute capability 7.5 (docs/upstream-facts.md P1.7); each refusal says what to do. Must not
plan anything (plan.py calls it for each node whose config is MPS). Pure.
"""

from __future__ import annotations

from kubectl_gpu.sharing import deployment as deployments
from kubectl_gpu.sharing import strategies
from kubectl_gpu.sharing.rollout.nodes import GpuNode
from kubectl_gpu.sharing.rollout.state import ClusterState, Doc, ShareRefused, flag_strategy

MPS_CAP_CAPABILITY = (7, 5)  # below it MPS allows 16 clients per GPU (docs/upstream-facts.md P1.7)


def check(state: ClusterState, node: GpuNode, key: str, doc: Doc, replicas: int) -> None:
    """Refuse MPS under `key` (content `doc`, `replicas` per GPU) where `node` cannot run it."""
    if node.mig_enabled:
        raise ShareRefused(
            f"node {node.name} has MIG enabled: sharing using MPS is not supported for MIG devices",
            hint="use time-slicing on MIG nodes (drop --mps), or turn MIG off there first: "
            f"kubectl gpu mig apply -f FILE -c all-disabled --node {node.name}",
        )
    if _migstrategy_of(state, doc) == "mixed":
        raise ShareRefused(
            f"node {node.name}: using --mig-strategy=mixed is not supported with MPS "
            f"({_mixed_source(state, key)})",
            hint=_mixed_hint(state, node.name),
        )
    capability = node.compute_capability
    cap = strategies.MPS_MAX_REPLICAS_OLD_GPU
    if capability is not None and capability < MPS_CAP_CAPABILITY and replicas > cap:
        raise ShareRefused(
            f"node {node.name} has GPUs of compute capability {capability[0]}.{capability[1]}: "
            f"MPS allows at most {cap} replicas there, not {replicas} (the MPS control "
            "daemon would crash-loop)",
            hint=f"use --replicas {cap} or fewer for this node (--node {node.name})",
        )


def _mixed_source(state: ClusterState, key: str) -> str:
    deployment = state.deployment
    forced = deployments.effective_flag(deployment, ("migStrategy",))
    if forced is not None:
        return f"env MIG_STRATEGY={forced} on container {deployment.container} wins over the key"
    return f"flags.migStrategy: mixed in key {key or 'none'}"


def _mixed_hint(state: ClusterState, node: str) -> str:
    deployment = state.deployment
    if deployments.effective_flag(deployment, ("migStrategy",)) is not None:
        return (
            f"remove env MIG_STRATEGY from container {deployment.container} of DaemonSet "
            f"{deployment.namespace}/{deployment.daemonset} (the key then decides), or use "
            "time-slicing (drop --mps)"
        )
    return (
        f"share per node (--node {node}): each node without MIG-enabled GPUs then gets a key "
        "with migStrategy none; or use time-slicing (drop --mps)"
    )


def _migstrategy_of(state: ClusterState, doc: Doc) -> str:
    forced = deployments.effective_flag(state.deployment, ("migStrategy",))
    if forced is not None:
        return forced
    return flag_strategy(doc) or "none"
