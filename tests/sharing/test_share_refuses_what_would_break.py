"""Every refusal of `kubectl gpu share`: bad arguments, MPS limits, unreadable configs."""

from __future__ import annotations

from typing import Any

import pytest

from kubectl_gpu import errors
from kubectl_gpu.sharing import rollout
from kubectl_gpu.sharing.rollout import ShareRefused, ShareRequest
from tests.workflows.sharebuilders import gpu_node, helm, state, ts

PLAIN = "version: v1\n"


@pytest.mark.parametrize("replicas", [0, 1, -3, True, 2.5, "3"])
def test_replicas_below_2_or_not_whole_are_usage_errors(replicas: Any) -> None:
    with pytest.raises(errors.UsageError) as caught:
        rollout.check_request(ShareRequest(replicas=replicas))
    assert caught.value.exit_code == 2 and "share off" in caught.value.hint


def test_mps_over_48_replicas_is_refused_with_upstreams_words() -> None:
    with pytest.raises(errors.UsageError, match="maximum allowed replicas exceeded: 49 > 48"):
        rollout.check_request(ShareRequest(replicas=49, mps=True))
    rollout.check_request(ShareRequest(replicas=48, mps=True))


def test_mps_shares_full_gpus_only() -> None:
    with pytest.raises(errors.UsageError, match="MPS shares full GPUs only"):
        rollout.check_request(ShareRequest(replicas=2, mps=True, resource="nvidia.com/mig-1g.10gb"))


@pytest.mark.parametrize(
    "resource", ["example.com/gpu", "nvidia.com/GPU", "nvidia.com/" + "g" * 60]
)
def test_invalid_resource_names_are_usage_errors(resource: str) -> None:
    with pytest.raises(errors.UsageError, match="invalid --resource"):
        rollout.check_request(ShareRequest(replicas=2, resource=resource))


@pytest.mark.parametrize("key", ["has space", "-dash", "x" * 64, "..hidden"])
def test_keys_a_label_cannot_select_are_usage_errors(key: str) -> None:
    with pytest.raises(errors.UsageError, match="cannot be selected by the node label"):
        rollout.check_request(ShareRequest(replicas=2, key=key))


def test_mps_over_16_on_gpus_below_compute_capability_7_5_is_refused() -> None:
    nodes = [gpu_node("v100", 8, capability=(7, 0)), gpu_node("h100", 8, capability=(9, 0))]
    cluster = state(helm(), {"any": PLAIN}, nodes)
    with pytest.raises(
        ShareRefused, match="node v100 has GPUs of compute capability 7.0"
    ) as caught:
        rollout.make(cluster, ShareRequest(replicas=20, mps=True))
    assert "--node v100" in caught.value.hint
    rollout.make(cluster, ShareRequest(replicas=20, mps=True, nodes=("h100",)))
    rollout.make(cluster, ShareRequest(replicas=16, mps=True))


def test_mps_with_mig_strategy_mixed_in_the_config_is_refused() -> None:
    cluster = state(
        helm(), {"any": "version: v1\nflags:\n  migStrategy: mixed\n"}, [gpu_node("a", 2)]
    )
    with pytest.raises(ShareRefused, match="mig-strategy=mixed is not supported with MPS"):
        rollout.make(cluster, ShareRequest(replicas=2, mps=True))


def test_mps_with_mig_strategy_mixed_forced_by_env_is_refused() -> None:
    cluster = state(helm(MIG_STRATEGY="mixed"), {"any": PLAIN}, [gpu_node("a", 2)])
    with pytest.raises(ShareRefused, match="mig-strategy=mixed is not supported with MPS"):
        rollout.make(cluster, ShareRequest(replicas=2, mps=True))


def test_mps_on_a_node_with_mig_enabled_is_refused() -> None:
    mig = gpu_node("a", 2, extra={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"})
    cluster = state(helm(), {"any": PLAIN}, [mig])
    with pytest.raises(ShareRefused, match="node a has MIG enabled"):
        rollout.make(cluster, ShareRequest(replicas=2, mps=True))


def test_mps_gets_an_mps_root_when_nothing_sets_one() -> None:
    bare = helm()
    bare = type(bare)(**{**bare.__dict__, "env_overrides": ()})
    plan = rollout.make(
        state(bare, {"any": PLAIN}, [gpu_node("a", 2)]), ShareRequest(replicas=2, mps=True)
    )
    assert plan.keys[0].doc["flags"] == {"mpsRoot": "/run/nvidia/mps"}  # type: ignore[index]
    with_env = rollout.make(
        state(helm(), {"any": PLAIN}, [gpu_node("a", 2)]), ShareRequest(replicas=2, mps=True)
    )
    assert "flags" not in with_env.keys[0].doc  # type: ignore[operator]


def test_an_unreadable_key_is_not_built_upon() -> None:
    cluster = state(helm(), {"any": "sharing: [unclosed"}, [gpu_node("a", 2)])
    with pytest.raises(ShareRefused, match="key 'any' .* is not a readable config") as caught:
        rollout.make(cluster, ShareRequest(replicas=2))
    assert "kubectl gpu validate" in caught.value.hint


def test_an_empty_selection_is_a_usage_error() -> None:
    with pytest.raises(errors.UsageError, match="no node was selected"):
        rollout.check_request(ShareRequest(replicas=2, nodes=()))


def test_many_time_slicing_replicas_are_allowed() -> None:
    plan = rollout.make(
        state(helm(), {"any": ts(2)}, [gpu_node("a", 1)]), ShareRequest(replicas=64)
    )
    assert plan.nodes[0].expected == 64  # the warning comes from the validator (workflow tests)
