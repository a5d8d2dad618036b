"""Whether a DaemonSet brings its pod back on a node, as the DaemonSet controller decides it:
a foreign `NoSchedule`/`NoExecute` taint it does not tolerate keeps it away (and the fix names
the toleration, where it sticks), a cordon or a soft taint does not, nor do the tolerations
the controller adds itself; a selector that misses the node is said too."""

from __future__ import annotations

import json
import shlex
from typing import Any

import pytest

from kubectl_gpu.doctor import daemons, facts

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def daemonset(tolerations: list[dict[str, str]] | None = None, **spec: Any) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {"containers": [{"name": "plugin"}], **spec}
    if tolerations is not None:
        pod_spec["tolerations"] = tolerations
    return {
        "metadata": {"name": "nvdp", "namespace": "nvidia", "generation": 1},
        "spec": {"template": {"spec": pod_spec}},
        "status": {"observedGeneration": 1, "desiredNumberScheduled": 2,
                   "updatedNumberScheduled": 2},
    }  # fmt: skip


def node(*taints: dict[str, str], labels: dict[str, str] | None = None) -> facts.Node:
    raw = {"metadata": {"name": "gpu-a", "labels": labels or {}}, "spec": {"taints": list(taints)}}
    return facts.node_from_dict(raw)


def test_a_foreign_taint_keeps_the_plugin_away_and_the_fix_names_the_toleration() -> None:
    plugin = daemons.daemonset_from_dict(daemonset([GPU_TOLERATION]), "device plugin")
    dedicated = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}

    found = daemons.blocker(plugin, node(dedicated, {**GPU_TOLERATION, "value": "present"}))

    assert found is not None
    assert found.reason() == (
        "the device plugin DaemonSet nvidia/nvdp does not tolerate taint dedicated=ml:NoSchedule "
        "of node gpu-a"
    )
    fix = found.fix()
    assert "{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}" in fix
    assert "or remove the taint: kubectl taint node gpu-a dedicated:NoSchedule-" in fix
    command = shlex.split(fix[fix.index("kubectl -n") : fix.index("; or remove")])
    assert command[:5] == ["kubectl", "-n", "nvidia", "patch", "daemonset"]
    assert json.loads(command[-1]) == [
        {"op": "add", "path": "/spec/template/spec/tolerations/-",
         "value": {"key": "dedicated", "operator": "Equal", "value": "ml",
                   "effect": "NoSchedule"}}
    ]  # fmt: skip


def test_a_daemonset_without_tolerations_gets_a_patch_that_creates_the_list() -> None:
    plugin = daemons.daemonset_from_dict(daemonset(), "device plugin")
    found = daemons.blocker(plugin, node({"key": "maintenance", "effect": "NoExecute"}))
    assert found is not None
    fix = found.fix()
    patch = json.loads(shlex.split(fix[fix.index("kubectl -n") : fix.index("; or remove")])[-1])
    assert patch == [{"op": "add", "path": "/spec/template/spec/tolerations",
                      "value": [{"key": "maintenance", "operator": "Exists",
                                 "effect": "NoExecute"}]}]  # fmt: skip


@pytest.mark.parametrize(
    "taint",
    [
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},  # a cordon
        {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "ml", "effect": "PreferNoSchedule"},  # soft: no block
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
    ],
)
def test_what_the_controller_tolerates_itself_or_a_soft_taint_blocks_nothing(
    taint: dict[str, str],
) -> None:
    plugin = daemons.daemonset_from_dict(daemonset([GPU_TOLERATION]), "device plugin")
    assert daemons.blocker(plugin, node(taint)) is None


def test_a_toleration_of_everything_tolerates_every_taint() -> None:
    plugin = daemons.daemonset_from_dict(daemonset([{"operator": "Exists"}]), "device plugin")
    assert daemons.blocker(plugin, node({"key": "dedicated", "effect": "NoExecute"})) is None


def test_a_selector_that_misses_the_node_is_named() -> None:
    paused = {"nvidia.com/gpu.deploy.device-plugin": "paused-for-mig-change"}
    plugin = daemons.daemonset_from_dict(
        daemonset(nodeSelector={"nvidia.com/gpu.deploy.device-plugin": "true"}), "device plugin"
    )
    found = daemons.blocker(plugin, node(labels=paused))
    assert found is not None
    assert (
        "does not select node gpu-a (nvidia.com/gpu.deploy.device-plugin=true (node has "
        "paused-for-mig-change))" in found.reason()
    )
    assert not daemons.selects(plugin, node(labels=paused))
    assert "kubectl gpu mig recover gpu-a" in found.fix()  # paused by a MIG change


def test_the_operators_daemonsets_are_fixed_in_the_cluster_policy() -> None:
    plugin = daemons.daemonset_from_dict(
        daemonset([GPU_TOLERATION]), "device plugin", "gpu-operator"
    )
    found = daemons.blocker(
        plugin, node({"key": "dedicated", "value": "ml", "effect": "NoSchedule"})
    )
    assert found is not None
    assert "ClusterPolicy's spec.daemonsets.tolerations" in found.fix()
    assert "patch daemonset" not in found.fix()  # the operator would undo it


def test_a_daemonset_mid_rollout_says_so() -> None:
    raw = daemonset([GPU_TOLERATION])
    raw["status"]["updatedNumberScheduled"] = 1
    assert daemons.daemonset_from_dict(raw, "device plugin").rolling == (
        "only 1 of its 2 pods run its latest pod template"
    )
    raw["metadata"]["generation"] = 2
    assert "not yet rolled out" in daemons.daemonset_from_dict(raw, "device plugin").rolling


def test_a_taint_kubernetes_sets_from_a_node_condition_is_not_a_reservation() -> None:
    plugin = daemons.daemonset_from_dict(daemonset([GPU_TOLERATION]), "device plugin")
    not_ready = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    assert daemons.blocker(plugin, node(not_ready)) is None


def test_doctor_on_a_pod_names_the_taint_that_keeps_its_nodes_plugin_away() -> None:
    from kubectl_gpu.doctor import nodeside
    from tests.doctor.builders import node as built_node
    from tests.doctor.builders import pod

    plugin = daemons.daemonset_from_dict(daemonset([GPU_TOLERATION]), "device plugin")
    blocked = daemons.blocker(
        plugin, node({"key": "dedicated", "value": "ml", "effect": "NoSchedule"})
    )
    assert blocked is not None
    known = nodeside.PluginOnNode(True, None, "nvidia", "plugin", "name=nvdp",
                                  blocked=blocked.reason(), fix=blocked.fix())  # fmt: skip

    [found] = nodeside.kubelet(
        pod(node="gpu-a", phase="Pending"), built_node("gpu-a", 1), known, []
    )

    assert found.message == (
        "no device plugin pod runs on node gpu-a: the device plugin DaemonSet nvidia/nvdp does "
        "not tolerate taint dedicated=ml:NoSchedule of node gpu-a"
    )
    assert "{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}" in found.fix
