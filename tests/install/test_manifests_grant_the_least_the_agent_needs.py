"""The rendered manifests: least privilege, the agent pod's shape, and what `share` detects."""

from __future__ import annotations

from typing import Any

import pytest

from kubectl_gpu import bundle, keys
from kubectl_gpu.errors import UsageError
from kubectl_gpu.sharing import deployment

Obj = dict[str, Any]
BUNDLE = bundle.render(bundle.Options())
OPERATOR = bundle.render(bundle.Options(mode="operator", operator_namespace="nvidia-gpu"))


def find(objects: list[Obj], kind: str, name: str, namespace: str = "") -> Obj:
    return next(o for o in objects if bundle.identity(o) == (kind, namespace, name))


def rules_of(objects: list[Obj], kind: str, name: str, namespace: str = "") -> list[Obj]:
    return list(find(objects, kind, name, namespace)["rules"])


def agent_pod(objects: list[Obj]) -> Obj:
    spec: Obj = find(objects, "DaemonSet", bundle.AGENT, "kubectl-gpu")["spec"]["template"]["spec"]
    return spec


def test_the_agent_is_granted_no_wildcard_no_secret_and_no_cluster_wide_delete() -> None:
    cluster_rules = rules_of(BUNDLE, "ClusterRole", bundle.AGENT)
    for rule in cluster_rules:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"]
        assert "delete" not in rule["verbs"]
        assert "secrets" not in rule["resources"]
    writes = {r: set(rule["verbs"]) - {"get", "list", "watch"} for rule in cluster_rules
              for r in rule["resources"]}  # fmt: skip
    assert writes == {
        "nodes": {"patch"},
        "daemonsets": set(),
        "clusterpolicies": set(),
        "gpunodereports": {"create", "update", "patch"},
    }


@pytest.mark.parametrize(
    ("objects", "plugin_ns"), [(BUNDLE, "kubectl-gpu"), (OPERATOR, "nvidia-gpu")]
)
def test_plugin_pods_may_be_deleted_only_in_the_plugins_namespace(
    objects: list[Obj], plugin_ns: str
) -> None:
    deleting = [o for o in objects if o["kind"] in ("Role", "ClusterRole")
                and any("delete" in r["verbs"] for r in o["rules"])]  # fmt: skip
    assert [bundle.identity(o) for o in deleting] == [
        ("Role", plugin_ns, "kubectl-gpu-agent-plugin-restart")
    ]
    [rule] = deleting[0]["rules"]
    assert rule["resources"] == ["pods"]
    binding = find(objects, "RoleBinding", "kubectl-gpu-agent-plugin-restart", plugin_ns)
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": bundle.AGENT, "namespace": "kubectl-gpu"}
    ]


def test_the_agent_pod_gets_its_node_name_and_kubelet_directories() -> None:
    spec = agent_pod(BUNDLE)
    [container] = spec["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    for path in ("/var/lib/kubelet/device-plugins", "/var/lib/kubelet/pod-resources"):
        assert mounts[path]["readOnly"] is True
        assert volumes[mounts[path]["name"]]["hostPath"] == {"path": path, "type": "Directory"}


def test_the_agent_is_privileged_like_nvidias_mig_manager_and_nothing_more() -> None:
    spec = agent_pod(BUNDLE)
    [container] = spec["containers"]
    security = container["securityContext"]
    assert security["privileged"] is True and security["readOnlyRootFilesystem"] is True
    assert not spec.get("hostNetwork") and not spec.get("hostIPC")
    assert set(container["resources"]) == {"requests", "limits"}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        command = container[probe]["exec"]["command"]
        assert command[:2] == ["kubectl-gpu-agent", "--check-health"]
        assert command[command.index("--heartbeat") + 1] in container["args"]


def test_the_agent_sees_host_pids_and_serves_only_its_usage_port_for_top() -> None:
    """NVML's PIDs are the host's: `top` maps them to pods through /proc/<pid>/cgroup, which
    needs the host's PID namespace; the one port is the read-only usage endpoint."""
    spec = agent_pod(BUNDLE)
    [container] = spec["containers"]
    assert spec["hostPID"] is True
    assert container["ports"] == [{"name": "usage", "containerPort": 9402, "protocol": "TCP"}]
    args = container["args"]
    assert args[args.index("--usage-port") + 1] == "9402"
    assert args[args.index("--proc-root") + 1] == "/proc"


@pytest.mark.parametrize("name", [bundle.AGENT, bundle.DEVICE_PLUGIN])
def test_daemonsets_run_only_on_gpu_nodes_tolerating_gpu_taints(name: str) -> None:
    ds = find(BUNDLE, "DaemonSet", name, "kubectl-gpu")
    spec = ds["spec"]["template"]["spec"]
    assert spec["priorityClassName"] == "system-node-critical"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec[
        "tolerations"
    ]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    wanted = {(e["key"], e["operator"], tuple(e.get("values", ()))) for t in
              terms["nodeSelectorTerms"] for e in t["matchExpressions"][:1]}  # fmt: skip
    assert wanted == set(bundle.GPU_NODE_TERMS)
    assert ds["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    for container in spec["containers"] + spec.get("initContainers", []):
        assert set(container["resources"]) == {"requests", "limits"}, container["name"]


def test_share_detects_the_bundle_plugin_with_per_node_configs() -> None:
    found = deployment.detect([], [o for o in BUNDLE if o["kind"] == "DaemonSet"])
    assert found.kind == "bundle"
    assert (found.configmap, found.default_key) == (bundle.DEVICE_PLUGIN_CONFIGMAP, "default")
    assert found.fallback_strategies == ("named", "single")
    configs = find(BUNDLE, "ConfigMap", bundle.DEVICE_PLUGIN_CONFIGMAP, "kubectl-gpu")
    assert keys.DEFAULT_CONFIG_KEY in configs["data"]


@pytest.mark.parametrize("version", bundle.DEVICE_PLUGIN_VERSIONS)
def test_every_plugin_container_runs_the_pinned_image(version: str) -> None:
    objects = bundle.render(bundle.Options(device_plugin_version=version))
    spec = find(objects, "DaemonSet", bundle.DEVICE_PLUGIN, "kubectl-gpu")["spec"]["template"]
    containers = spec["spec"]["containers"] + spec["spec"]["initContainers"]
    assert {c["image"] for c in containers} == {f"nvcr.io/nvidia/k8s-device-plugin:{version}"}


def test_operator_mode_brings_no_device_plugin() -> None:
    assert [o["metadata"]["name"] for o in OPERATOR if o["kind"] == "DaemonSet"] == [bundle.AGENT]
    assert not [o for o in OPERATOR if bundle.DEVICE_PLUGIN in o["metadata"]["name"]]


def test_the_report_crd_is_shipped_unchanged() -> None:
    crd = find(BUNDLE, "CustomResourceDefinition", "gpunodereports.kubectl-gpu.io")
    assert crd["spec"]["group"] == "kubectl-gpu.io" and crd["spec"]["scope"] == "Cluster"


@pytest.mark.parametrize(
    "options",
    [
        bundle.Options(namespace="Kube_GPU"),
        bundle.Options(agent_image="evil:1\n  privileged: true"),
        bundle.Options(device_plugin_version="latest"),
        bundle.Options(mode="helm"),  # type: ignore[arg-type]
    ],
)
def test_options_that_could_break_the_yaml_are_refused(options: bundle.Options) -> None:
    with pytest.raises(UsageError):
        bundle.render(options)
