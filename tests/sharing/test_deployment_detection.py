"""Finding the device plugin and its config in the objects each deployment really creates."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubectl_gpu.sharing import deployment as deployments
from kubectl_gpu.sharing.deployment import DeploymentError, Overrides
from tests.kit.cluster.operator import render_gfd, render_plugin
from tests.kit.kube import layouts
from tests.workflows import sharebuilders

Obj = dict[str, Any]
CONFIG = "version: v1\n"


def operator_objects(configured: bool = True, **plugin: Any) -> tuple[Obj, list[Obj]]:
    layout = layouts.gpu_operator({"any": CONFIG} if configured else None, "any")
    policy = copy.deepcopy(layout.objects[-1])
    policy["metadata"]["uid"] = "7d0c8f2e-policy"
    policy["spec"]["devicePlugin"].update(plugin)
    return policy, [render_plugin(policy, "gpu-operator"), render_gfd(policy, "gpu-operator")]


def daemonsets(layout: layouts.Layout) -> list[Obj]:
    return [o for o in layout.objects if o["kind"] == "DaemonSet"]


def test_gpu_operator_config_comes_from_the_cluster_policy() -> None:
    policy, sets = operator_objects()
    found = deployments.detect([policy], sets)
    assert (found.kind, found.namespace, found.daemonset) == (
        "gpu-operator",
        "gpu-operator",
        "nvidia-device-plugin-daemonset",
    )
    assert found.selector == "app=nvidia-device-plugin-daemonset"
    assert found.container == "nvidia-device-plugin"
    assert (found.configmap, found.default_key) == ("time-slicing-config", "any")
    assert found.fallback_strategies == ("empty",)
    assert found.cluster_policy == "cluster-policy" and found.reads_configmap
    assert found.companions == ("gpu-feature-discovery",)


def test_gpu_operator_without_a_config_gets_one_to_be_created() -> None:
    policy, sets = operator_objects(configured=False)
    found = deployments.detect([policy], sets)
    assert found.policy_config is None and not found.reads_configmap
    assert (found.configmap, found.default_key) == (deployments.DEFAULT_CONFIGMAP, "")


def test_gpu_operator_env_vars_that_override_the_file_are_known() -> None:
    policy, sets = operator_objects()
    found = deployments.detect([policy], sets)
    env = dict(found.env_overrides)
    assert env["MIG_STRATEGY"] == "single" and env["DEVICE_ID_STRATEGY"] == "uuid"
    conflicts = deployments.overridden_flags(found, {"flags": {"migStrategy": "mixed"}})
    assert conflicts == [("MIG_STRATEGY", "single", "migStrategy", "mixed")]
    assert deployments.overridden_flags(found, {"flags": {"migStrategy": "single"}}) == []


def test_a_disabled_operator_plugin_leaves_room_for_helm() -> None:
    policy, _ = operator_objects(enabled=False)
    found = deployments.detect([policy], daemonsets(layouts.helm({"any": CONFIG}, "any")))
    assert found.kind == "helm"


def test_helm_chart_config_comes_from_the_config_manager_mount() -> None:
    layout = layouts.helm({"any": CONFIG, "other": CONFIG}, "any", fallback_strategies="named")
    found = deployments.detect([], daemonsets(layout))
    assert found.kind == "helm"
    assert (found.namespace, found.daemonset) == (
        "nvidia-device-plugin",
        "nvdp-nvidia-device-plugin",
    )
    assert found.container == "nvidia-device-plugin-ctr"
    assert (
        found.selector
        == "app.kubernetes.io/instance=nvdp,app.kubernetes.io/name=nvidia-device-plugin"
    )
    assert (found.configmap, found.default_key) == ("nvdp-nvidia-device-plugin-configs", "any")
    assert found.fallback_strategies == ("named",)
    assert found.companions == ("nvdp-nvidia-device-plugin-gpu-feature-discovery",)


def test_helm_pods_of_gfd_share_the_labels_but_are_not_the_plugin() -> None:
    found = deployments.detect([], daemonsets(layouts.helm({"any": CONFIG}, "any")))
    plugin = {
        "metadata": {"ownerReferences": [{"kind": "DaemonSet", "name": found.daemonset}]},
        "spec": {"containers": [{"name": "nvidia-device-plugin-ctr"}]},
    }
    gfd = {
        "metadata": {"ownerReferences": [{"kind": "DaemonSet", "name": found.companions[0]}]},
        "spec": {"containers": [{"name": "gpu-feature-discovery-ctr"}]},
    }
    assert deployments.is_plugin_pod(found, plugin)
    assert not deployments.is_plugin_pod(found, gfd)


def test_helm_without_a_config_says_which_helm_upgrade_to_run() -> None:
    with pytest.raises(DeploymentError) as caught:
        deployments.detect([], daemonsets(layouts.helm(None)))
    assert "cannot take a sharing config" in caught.value.message
    assert "helm upgrade nvdp" in caught.value.hint
    assert (
        "--set config.name=" in caught.value.hint and "-n nvidia-device-plugin" in caught.value.hint
    )


def test_static_manifest_says_exactly_what_to_add() -> None:
    with pytest.raises(DeploymentError) as caught:
        deployments.detect([], daemonsets(layouts.static()))
    error = caught.value
    assert "kube-system/nvidia-device-plugin-daemonset (static manifest)" in error.message
    for needed in (
        "available-configs",
        "CONFIG_FILE=/config/config.yaml",
        "config-manager",
        "NODE_LABEL=nvidia.com/device-plugin.config",
        "shareProcessNamespace: true",
        "get/list/watch nodes",
    ):
        assert needed in error.hint, needed


def test_our_bundle_is_recognised_by_its_managed_by_label() -> None:
    found = deployments.detect([], daemonsets(sharebuilders.bundle({"default": CONFIG})))
    assert found.kind == "bundle"
    assert (found.namespace, found.configmap, found.default_key) == (
        "kubectl-gpu",
        sharebuilders.BUNDLE_CONFIGMAP,
        "default",
    )
    assert found.container == sharebuilders.BUNDLE_CONTAINER


def test_no_plugin_at_all_is_an_error_with_a_way_forward() -> None:
    unrelated = layouts.helm({"any": CONFIG}, "any").objects[-1]  # GFD only
    with pytest.raises(DeploymentError, match="found no NVIDIA device plugin DaemonSet"):
        deployments.detect([], [unrelated])


def test_two_helm_releases_need_a_namespace_to_choose() -> None:
    first = daemonsets(layouts.helm({"any": CONFIG}, "any"))
    second = daemonsets(layouts.helm({"any": CONFIG}, "any", release="team-b", namespace="team-b"))
    with pytest.raises(DeploymentError, match="several device plugin DaemonSets"):
        deployments.detect([], first + second)
    chosen = deployments.detect([], first + second, Overrides(namespace="team-b"))
    assert chosen.daemonset == "team-b-nvidia-device-plugin"


def test_configmap_override_must_be_the_one_helm_mounts() -> None:
    sets = daemonsets(layouts.helm({"any": CONFIG}, "any"))
    with pytest.raises(DeploymentError, match="would never read mine"):
        deployments.detect([], sets, Overrides(configmap="mine"))


def test_configmap_override_on_the_operator_points_the_policy_elsewhere() -> None:
    policy, sets = operator_objects()
    found = deployments.detect([policy], sets, Overrides(configmap="mine"))
    assert found.configmap == "mine" and not found.reads_configmap
