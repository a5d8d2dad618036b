"""Builders for `kubectl gpu share` tests: raw nodes, deployments, planner states, the bundle.

Owns small constructors shared by the pure tests (tests/sharing/test_share_*.py), the workflow
tests and the CLI tests: GPU nodes with the labels GFD writes, `Deployment` values for each
layout, a `ClusterState` from ConfigMap texts, and the "bundle" layout (our own DaemonSet,
labelled `app.kubernetes.io/managed-by: kubectl-gpu`, config selected per node like the Helm
chart's), which the cluster simulation does not ship. Test code only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from kubectl_gpu import keys
from kubectl_gpu.sharing import rollout
from kubectl_gpu.sharing.deployment import Deployment
from tests.kit.kube.layouts import Layout

Obj = dict[str, Any]
BUNDLE_NAMESPACE = "kubectl-gpu"
BUNDLE_DAEMONSET = "kubectl-gpu-device-plugin"
BUNDLE_CONFIGMAP = "kubectl-gpu-device-plugin-configs"
BUNDLE_CONTAINER = "nvidia-device-plugin-ctr"
PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"


def ts(replicas: int, resource: str = "nvidia.com/gpu", **flags: Any) -> str:
    """A time-slicing config's text."""
    doc: Obj = {"version": "v1"}
    if flags:
        doc["flags"] = flags
    doc["sharing"] = {"timeSlicing": {"resources": [{"name": resource, "replicas": replicas}]}}
    return yaml.safe_dump(doc, sort_keys=False)


def gpu_node(
    name: str,
    gpus: int = 8,
    *,
    replicas: int = 1,
    label: str | None = None,
    counted: bool = True,
    capability: tuple[int, int] = (9, 0),
    extra: Mapping[str, str] | None = None,
    resource: str = "nvidia.com/gpu",
) -> Obj:
    """A GPU node advertising `gpus` × `replicas`, labelled as GFD labels it."""
    labels = {"kubernetes.io/hostname": name, keys.GPU_PRESENT_LABEL: "true"}
    if counted:
        labels[resource + ".count"] = str(gpus)
        labels[keys.GPU_COMPUTE_MAJOR_LABEL] = str(capability[0])
        labels[keys.GPU_COMPUTE_MINOR_LABEL] = str(capability[1])
    if label is not None:
        labels[keys.DEVICE_PLUGIN_CONFIG_LABEL] = label
    labels.update(extra or {})
    amount = str(gpus * replicas)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {
            "capacity": {"cpu": "8", resource: amount},
            "allocatable": {"cpu": "8", resource: amount},
        },
    }


def helm(
    default: str = "any", fallbacks: Sequence[str] = ("named", "single"), **env: str
) -> Deployment:
    return Deployment(
        kind="helm",
        namespace="nvidia-device-plugin",
        daemonset="nvdp-nvidia-device-plugin",
        pod_selector=(
            ("app.kubernetes.io/instance", "nvdp"),
            ("app.kubernetes.io/name", "nvidia-device-plugin"),
        ),
        container="nvidia-device-plugin-ctr",
        configmap="nvdp-nvidia-device-plugin-configs",
        default_key=default,
        fallback_strategies=tuple(fallbacks),
        env_overrides=tuple(sorted({"MPS_ROOT": "/run/nvidia/mps", **env}.items())),
    )


def operator(
    configmap: str = "time-slicing-config",
    default: str = "any",
    configured: bool = True,
    **env: str,
) -> Deployment:
    return Deployment(
        kind="gpu-operator",
        namespace="gpu-operator",
        daemonset="nvidia-device-plugin-daemonset",
        pod_selector=(("app", "nvidia-device-plugin-daemonset"),),
        container="nvidia-device-plugin",
        configmap=configmap,
        default_key=default if configured else "",
        fallback_strategies=("empty",),
        env_overrides=tuple(sorted({"MPS_ROOT": "/run/nvidia/mps", **env}.items())),
        cluster_policy="cluster-policy",
        policy_config=(configmap, default) if configured else None,
    )


def state(
    deployment: Deployment,
    configs: Mapping[str, str] | None,
    nodes: Sequence[Obj],
    record: str = "",
) -> rollout.ClusterState:
    """The planner's input: `configs` None means the ConfigMap does not exist."""
    texts = dict(configs or {})
    docs: dict[str, rollout.Doc] = {}
    for key, text in texts.items():
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError:
            continue
        if loaded is None or isinstance(loaded, dict):
            docs[key] = loaded
    configmap = rollout.ConfigMapState(
        deployment.namespace, deployment.configmap, configs is not None, texts, docs, record
    )
    gpu_nodes = tuple(sorted((rollout.GpuNode.from_dict(n) for n in nodes), key=lambda n: n.name))
    return rollout.ClusterState(deployment, configmap, gpu_nodes)


def bundle(
    configs: Mapping[str, str], default: str = "default", *, env: Mapping[str, str] | None = None
) -> Layout:
    """Our own bundle (`kubectl gpu install`): a DaemonSet we manage, config per node by label.

    Built from plain dicts, like the Helm chart's (docs/upstream-facts.md P3.1): the
    plugin, a config-manager init container and sidecar, the ConfigMap at /available-configs.
    """
    selector = {"app.kubernetes.io/name": "kubectl-gpu-device-plugin"}
    main: Obj = {
        "name": BUNDLE_CONTAINER,
        "image": PLUGIN_IMAGE,
        "command": ["nvidia-device-plugin"],
        "env": _env({**(env or {}), "CONFIG_FILE": "/config/config.yaml"}),
        "volumeMounts": [
            {"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"},
            {"name": "config", "mountPath": "/config"},
        ],
    }
    spec: Obj = {
        "shareProcessNamespace": True,
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "nodeSelector": {keys.GPU_PRESENT_LABEL: "true"},
        "initContainers": [_config_manager("config-manager-init", default, oneshot=True)],
        "containers": [main, _config_manager("config-manager", default, oneshot=False)],
        "volumes": [
            {"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}},
            {"name": "available-configs", "configMap": {"name": BUNDLE_CONFIGMAP}},
            {"name": "config", "emptyDir": {}},
        ],
    }
    ours = {keys.MANAGED_BY_LABEL: keys.MANAGED_BY_VALUE}
    daemonset: Obj = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": BUNDLE_DAEMONSET,
            "namespace": BUNDLE_NAMESPACE,
            "labels": {**ours, **selector},
        },
        "spec": {
            "selector": {"matchLabels": dict(selector)},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {"metadata": {"labels": dict(selector)}, "spec": spec},
        },
    }
    configmap: Obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": BUNDLE_CONFIGMAP, "namespace": BUNDLE_NAMESPACE, "labels": ours},
        "data": dict(configs),
    }
    namespace: Obj = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": BUNDLE_NAMESPACE},
    }
    return Layout(
        "bundle",
        BUNDLE_NAMESPACE,
        (namespace, configmap, daemonset),
        BUNDLE_DAEMONSET,
        "app.kubernetes.io/name=kubectl-gpu-device-plugin",
        BUNDLE_CONTAINER,
        BUNDLE_CONFIGMAP,
    )


def _env(pairs: Mapping[str, str]) -> list[Obj]:
    return [{"name": k, "value": v} for k, v in pairs.items()]


def _config_manager(name: str, default: str, *, oneshot: bool) -> Obj:
    env = _env(
        {
            "ONESHOT": str(oneshot).lower(),
            "NODE_LABEL": keys.DEVICE_PLUGIN_CONFIG_LABEL,
            "CONFIG_FILE_SRCDIR": "/available-configs",
            "CONFIG_FILE_DST": "/config/config.yaml",
            "DEFAULT_CONFIG": default,
            "FALLBACK_STRATEGIES": "named,single",
            "SEND_SIGNAL": str(not oneshot).lower(),
            "SIGNAL": "" if oneshot else "1",
            "PROCESS_TO_SIGNAL": "" if oneshot else "nvidia-device-plugin",
        }
    )
    node_name = {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    return {
        "name": name,
        "image": PLUGIN_IMAGE,
        "command": ["config-manager"],
        "env": [node_name, *env],
        "volumeMounts": [
            {"name": "available-configs", "mountPath": "/available-configs"},
            {"name": "config", "mountPath": "/config"},
        ],
    }
