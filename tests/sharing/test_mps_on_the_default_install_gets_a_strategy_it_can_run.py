"""`kubectl gpu install` writes `migStrategy: mixed` into the default key (for the MIG nodes
beside), and the device plugin refuses MPS with `mixed`: a per-node MPS key for a node with no
MIG-enabled GPU says `migStrategy: none` (it advertises the same whole GPUs), and says so.
Where that cannot help (an env var forcing the strategy, a MIG-enabled node, a cluster-wide
change), the refusal says what to do instead."""

from __future__ import annotations

import pytest

from kubectl_gpu.sharing import rollout
from kubectl_gpu.sharing.rollout import ShareRefused, ShareRequest
from tests.workflows.sharebuilders import gpu_node, helm, state

MIXED = "version: v1\nflags:\n  migStrategy: mixed\n"


def test_a_nodes_own_mps_key_drops_mixed_where_no_gpu_is_mig_enabled() -> None:
    cluster = state(helm(), {"any": MIXED}, [gpu_node("gpu-a", 2), gpu_node("gpu-b", 1)])

    plan = rollout.make(cluster, ShareRequest(replicas=2, mps=True, nodes=("gpu-b",)))

    [key] = plan.keys
    assert key.key == "kubectl-gpu-mps-2"
    assert key.doc["flags"]["migStrategy"] == "none"  # type: ignore[index]
    assert key.doc["sharing"]["mps"]["resources"] == [  # type: ignore[index]
        {"name": "nvidia.com/gpu", "replicas": 2}
    ]
    assert [(n.node, n.expected) for n in plan.nodes] == [("gpu-b", 2)]
    assert any("migStrategy none (was mixed)" in note for note in plan.notes)
    assert cluster.configmap.docs["any"] == {"version": "v1", "flags": {"migStrategy": "mixed"}}


def test_time_slicing_keeps_the_strategy_it_had() -> None:
    cluster = state(helm(), {"any": MIXED}, [gpu_node("gpu-b", 1)])
    plan = rollout.make(cluster, ShareRequest(replicas=2, nodes=("gpu-b",)))
    assert plan.keys[0].doc["flags"]["migStrategy"] == "mixed"  # type: ignore[index]


def test_a_strategy_forced_by_env_is_refused_naming_the_env_var() -> None:
    cluster = state(helm(MIG_STRATEGY="mixed"), {"any": "version: v1\n"}, [gpu_node("gpu-b", 1)])
    with pytest.raises(ShareRefused, match="env MIG_STRATEGY=mixed on container") as caught:
        rollout.make(cluster, ShareRequest(replicas=2, mps=True, nodes=("gpu-b",)))
    assert "remove env MIG_STRATEGY from container nvidia-device-plugin-ctr" in caught.value.hint


def test_a_cluster_wide_mps_change_over_mixed_says_to_share_per_node() -> None:
    cluster = state(helm(), {"any": MIXED}, [gpu_node("gpu-b", 1)])
    with pytest.raises(ShareRefused, match="flags.migStrategy: mixed in key any") as caught:
        rollout.make(cluster, ShareRequest(replicas=2, mps=True))
    assert "--node gpu-b" in caught.value.hint


def test_a_mig_enabled_node_is_refused_with_how_to_turn_mig_off() -> None:
    mig = gpu_node(
        "gpu-a", 2, extra={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"}
    )
    cluster = state(helm(), {"any": MIXED}, [mig])
    with pytest.raises(ShareRefused, match="node gpu-a has MIG enabled") as caught:
        rollout.make(cluster, ShareRequest(replicas=2, mps=True, nodes=("gpu-a",)))
    assert "-c all-disabled --node gpu-a" in caught.value.hint
