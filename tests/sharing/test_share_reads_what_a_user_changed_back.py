"""Mismatches the other way round: a node still advertising more than its config asks for, and
config-manager's fallbacks taken in the order given (cosmic-ray survivors of issue 31's run,
docs/validate-vs-upstream.md "Mutation score")."""

from __future__ import annotations

from kubectl_gpu import keys
from kubectl_gpu.sharing import rollout
from kubectl_gpu.sharing.rollout import PluginPod
from kubectl_gpu.sharing.rollout.selection import EMPTY, select
from tests.workflows.sharebuilders import gpu_node, helm, state, ts

RUNNING = PluginPod("plugin-a", "Running", True, 0)


def test_capacity_above_what_the_config_asks_for_is_reported() -> None:
    # Replicas lowered from 8 to 4 in the key; the plugin still advertises 8 per GPU.
    cluster = state(helm(), {"any": ts(4)}, [gpu_node("a", 8, replicas=8)])
    [row] = rollout.survey(cluster, {"a": RUNNING}, {}, "nvidia.com/gpu")
    assert any(p.startswith("capacity 64 nvidia.com/gpu ≠ 8 physical × 4") for p in row.problems)


def test_an_empty_fallback_before_named_gives_no_config() -> None:
    available = {keys.DEFAULT_CONFIG_KEY, "other"}
    chosen = select({}, available, "", ["empty", "named"])
    assert (chosen.key, chosen.how) == (EMPTY, "empty")
    assert select({}, available, "", ["named", "empty"]).how == "named"


def test_a_node_advertising_nothing_yet_shows_zero_capacity() -> None:
    node = gpu_node("a", 8, replicas=4)
    node["status"]["capacity"].pop("nvidia.com/gpu")
    cluster = state(helm(), {"any": ts(4)}, [node])
    [row] = rollout.survey(cluster, {"a": RUNNING}, {}, "nvidia.com/gpu")
    assert row.capacity == 0
    assert any(p.startswith("capacity 0 nvidia.com/gpu ≠ 8 physical × 4") for p in row.problems)
