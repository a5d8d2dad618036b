"""Per-node changes: a key of their own, named predictably, reused, never taking others along."""

from __future__ import annotations

import pytest
import yaml

from kubectl_gpu import errors
from kubectl_gpu.sharing import rollout
from kubectl_gpu.sharing.rollout import ShareRefused, ShareRequest
from kubectl_gpu.sharing.rollout.keynames import key_name
from tests.workflows.sharebuilders import gpu_node, helm, operator, state, ts

MIXED = "version: v1\nflags:\n  migStrategy: mixed\n"
PLAIN = "version: v1\n"


def labels_after(plan: rollout.Plan) -> dict[str, str | None]:
    return {c.node: c.after for c in plan.labels}


@pytest.mark.parametrize(
    ("text", "resource", "expected"),
    [
        (ts(4), "nvidia.com/gpu", "kubectl-gpu-ts-4"),
        (
            "sharing: {mps: {resources: [{name: nvidia.com/gpu, replicas: 2}]}}",
            "nvidia.com/gpu",
            "kubectl-gpu-mps-2",
        ),
        (
            "sharing: {timeSlicing: {renameByDefault: true, resources: "
            "[{name: nvidia.com/mig-1g.10gb, replicas: 7}]}}",
            "nvidia.com/mig-1g.10gb",
            "kubectl-gpu-ts-7-mig-1g.10gb-shared",
        ),
        (PLAIN, "nvidia.com/gpu", "kubectl-gpu-off"),
    ],
)
def test_key_names_say_what_the_key_does(text: str, resource: str, expected: str) -> None:
    assert key_name(yaml.safe_load(text), resource) == expected


def test_one_node_gets_its_own_key_and_label_others_are_untouched() -> None:
    cluster = state(helm(), {"any": MIXED}, [gpu_node("a", 8), gpu_node("b", 4)])
    plan = rollout.make(cluster, ShareRequest(replicas=4, nodes=("b",)))
    [change] = plan.keys
    assert change.key == "kubectl-gpu-ts-4" and change.before is None
    # started from the config node b read, so its flags are kept
    assert change.doc["flags"] == {"migStrategy": "mixed"}  # type: ignore[index]
    assert labels_after(plan) == {"b": "kubectl-gpu-ts-4"}
    assert [(n.node, n.expected, n.reason) for n in plan.nodes] == [
        ("b", 16, "selects key kubectl-gpu-ts-4 (was any)")
    ]


def test_a_key_with_the_same_content_is_reused_whatever_its_name() -> None:
    configs = {"any": PLAIN, "four-way": ts(4)}
    cluster = state(helm(), configs, [gpu_node("a", 8), gpu_node("b", 4)])
    plan = rollout.make(cluster, ShareRequest(replicas=4, nodes=("a", "b")))
    assert plan.keys == ()
    assert labels_after(plan) == {"a": "four-way", "b": "four-way"}


def test_the_default_key_is_never_reused_for_a_per_node_change() -> None:
    # Pinning the node: a later cluster-wide change must not move it along.
    cluster = state(helm(), {"any": ts(4)}, [gpu_node("a", 8, replicas=4)])
    plan = rollout.make(cluster, ShareRequest(replicas=4, nodes=("a",)))
    assert [c.key for c in plan.keys] == ["kubectl-gpu-ts-4"]
    assert labels_after(plan) == {"a": "kubectl-gpu-ts-4"}


def test_a_node_already_on_the_wanted_key_stays() -> None:
    cluster = state(
        helm(),
        {"any": PLAIN, "kubectl-gpu-ts-4": ts(4)},
        [gpu_node("a", 8, replicas=4, label="kubectl-gpu-ts-4")],
    )
    plan = rollout.make(cluster, ShareRequest(replicas=4, nodes=("a",)))
    assert not plan.writes and plan.restarts == ()


def test_nodes_on_different_configs_get_different_keys() -> None:
    cluster = state(
        helm(), {"any": PLAIN, "mixed": MIXED}, [gpu_node("a", 8), gpu_node("b", 4, label="mixed")]
    )
    plan = rollout.make(cluster, ShareRequest(replicas=4, nodes=("a", "b")))
    names = labels_after(plan)
    assert names["a"] == "kubectl-gpu-ts-4"
    assert names["b"] != names["a"] and names["b"].startswith("kubectl-gpu-ts-4-")  # type: ignore[union-attr]
    docs = {c.key: c.doc for c in plan.keys}
    assert docs[names["b"]]["flags"] == {"migStrategy": "mixed"}  # type: ignore[index]


def test_a_named_key_read_by_other_nodes_is_refused() -> None:
    cluster = state(
        helm(),
        {"any": PLAIN, "shared": ts(2)},
        [gpu_node("a", 8), gpu_node("b", 4, replicas=2, label="shared")],
    )
    with pytest.raises(ShareRefused, match=r"key shared is also read by node\(s\) b"):
        rollout.make(cluster, ShareRequest(replicas=4, nodes=("a",), key="shared"))


def test_no_key_is_ever_removed_and_the_record_keeps_what_changed() -> None:
    configs = {"any": PLAIN, "old": ts(2)}
    cluster = state(helm(), configs, [gpu_node("a", 8, replicas=2, label="old"), gpu_node("b", 4)])
    plan = rollout.make(cluster, ShareRequest(replicas=None, nodes=("a",)))
    assert {c.key for c in plan.keys} == {"kubectl-gpu-off"}  # "old" stays as it is
    assert plan.record.keys == {"kubectl-gpu-off": None}
    assert plan.record.labels == {"a": "old"}
    assert labels_after(plan) == {"a": "kubectl-gpu-off"}


def test_a_node_labelled_with_a_missing_key_is_repaired_when_selected() -> None:
    cluster = state(helm(), {"any": PLAIN}, [gpu_node("a", 2, label="gone"), gpu_node("b", 2)])
    plan = rollout.make(cluster, ShareRequest(replicas=2, nodes=("a",)))
    assert labels_after(plan) == {"a": "kubectl-gpu-ts-2"}
    assert any("reads no usable config" in n for n in plan.notes)


def test_adding_a_key_that_breaks_the_single_fallback_is_refused() -> None:
    # Unlabelled nodes read "only" because it is the only key; a second key would leave them
    # with "all fallbacks failed" at the next plugin start.
    cluster = state(
        helm(default=""),
        {"only": ts(2)},
        [gpu_node("a", 2, replicas=2), gpu_node("b", 2, replicas=2)],
    )
    with pytest.raises(ShareRefused, match="config-manager on node b would fail"):
        rollout.make(cluster, ShareRequest(replicas=4, nodes=("a",)))


def test_operator_per_node_change_keeps_the_cluster_policy() -> None:
    cluster = state(operator(), {"any": PLAIN}, [gpu_node("a", 2), gpu_node("b", 2)])
    plan = rollout.make(cluster, ShareRequest(replicas=3, nodes=("a",)))
    assert plan.policy is None and labels_after(plan) == {"a": "kubectl-gpu-ts-3"}


def test_a_node_without_gpus_cannot_be_selected() -> None:
    cluster = state(helm(), {"any": PLAIN}, [gpu_node("a", 2)])
    with pytest.raises(errors.UsageError, match="node cpu-1 has no NVIDIA GPU"):
        rollout.make(cluster, ShareRequest(replicas=2, nodes=("cpu-1",)))
