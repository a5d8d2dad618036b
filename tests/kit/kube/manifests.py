"""Building blocks of NVIDIA's DaemonSets, shared by the deployments and the operator's renderer.

Owns plain-dict constructors for the pieces the Helm chart, the GPU Operator and the static
manifest have in common (docs/upstream-facts.md P3.1, P3.4, P6): env lists, the config-manager init
container and sidecar with the env they really carry, the ConfigMap and emptyDir volumes they share,
the DaemonSet shell, Namespaces and ConfigMaps. Values follow NVIDIA/k8s-device-plugin v0.20.0 and
gpu-operator `assets/state-device-plugin/0500_daemonset.yaml`. Must not decide which pieces a
deployment uses (layouts.py, operator.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
VALIDATOR_IMAGE = "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.2"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
NODE_NAME_ENV = {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}


def env(pairs: Mapping[str, str]) -> list[Obj]:
    return [{"name": k, "value": v} for k, v in pairs.items()]


def set_env(container: Obj, pairs: Mapping[str, str]) -> None:
    """Set or replace env vars on a container, keeping the order of those already there."""
    entries = container.setdefault("env", [])
    for name, value in pairs.items():
        for entry in entries:
            if entry.get("name") == name:
                entry.clear()
                entry.update(name=name, value=value)
                break
        else:
            entries.append({"name": name, "value": value})


@dataclass(frozen=True)
class ConfigWiring:
    """How a deployment wires config-manager next to one program (docs/upstream-facts.md P3.1 chart,
    P3.4 operator)."""

    configmap: str
    default: str
    fallbacks: str | None  # FALLBACK_STRATEGIES; None leaves it unset
    process: str  # PROCESS_TO_SIGNAL
    prefix: str = ""  # chart: "<program>-init"/"-sidecar"; operator: "config-manager[-init]"
    volume: str = "available-configs"  # the operator names the volume after the ConfigMap
    sidecar_first: bool = False  # the chart lists the sidecar before the program


def config_manager(name: str, wiring: ConfigWiring, *, oneshot: bool) -> Obj:
    """A config-manager container: ONESHOT init, or the sidecar that SIGHUPs the program."""
    pairs = {"ONESHOT": "true" if oneshot else "false", "KUBECONFIG": ""}
    tail = {
        "NODE_LABEL": "nvidia.com/device-plugin.config",
        "CONFIG_FILE_SRCDIR": "/available-configs",
        "CONFIG_FILE_DST": "/config/config.yaml",
        "DEFAULT_CONFIG": wiring.default,
        **({"FALLBACK_STRATEGIES": wiring.fallbacks} if wiring.fallbacks is not None else {}),
        "SEND_SIGNAL": "false" if oneshot else "true",
        "SIGNAL": "" if oneshot else "1",
        "PROCESS_TO_SIGNAL": "" if oneshot else wiring.process,
    }
    return {
        "name": name,
        "image": PLUGIN_IMAGE,
        "command": ["config-manager"],
        "env": [*env(pairs), dict(NODE_NAME_ENV), *env(tail)],
        "volumeMounts": [
            {"name": wiring.volume, "mountPath": "/available-configs"},
            {"name": "config", "mountPath": "/config"},
        ],
    }


def config_volumes(configmap: str, volume: str = "available-configs") -> list[Obj]:
    return [
        {"name": volume, "configMap": {"name": configmap}},
        {"name": "config", "emptyDir": {}},
    ]


def host_path(name: str, path: str, kind: str = "") -> Obj:
    source: Obj = {"path": path}
    if kind:
        source["type"] = kind
    return {"name": name, "hostPath": source}


def daemonset(
    name: str,
    namespace: str,
    *,
    selector: Mapping[str, str],
    labels: Mapping[str, str],
    pod_spec: Obj,
    annotations: Mapping[str, str] | None = None,
    max_unavailable: int | str = 1,
) -> Obj:
    template_meta: Obj = {"labels": dict(selector)}
    if annotations:
        template_meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "selector": {"matchLabels": dict(selector)},
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": max_unavailable, "maxSurge": 0},
            },
            "template": {"metadata": template_meta, "spec": pod_spec},
        },
    }


def namespace(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def configmap(
    name: str, ns: str, data: Mapping[str, str], labels: Mapping[str, str] | None = None
) -> Obj:
    meta: Obj = {"name": name, "namespace": ns}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": dict(data)}


def with_config_manager(spec: Obj, main: str, wiring: ConfigWiring) -> None:
    """Wire config-manager into a pod spec as the chart and the operator do (docs/upstream-facts.md
    P3.1, P3.4)."""
    spec["shareProcessNamespace"] = True
    prefix = wiring.prefix
    init = config_manager(
        f"{prefix}-init" if prefix else "config-manager-init", wiring, oneshot=True
    )
    sidecar = config_manager(
        f"{prefix}-sidecar" if prefix else "config-manager", wiring, oneshot=False
    )
    spec.setdefault("initContainers", []).append(init)
    containers: Sequence[Obj] = spec["containers"]
    target = next(c for c in containers if c["name"] == main)
    set_env(target, {"CONFIG_FILE": "/config/config.yaml"})
    target.setdefault("volumeMounts", []).extend(
        [
            {"name": wiring.volume, "mountPath": "/available-configs"},
            {"name": "config", "mountPath": "/config"},
        ]
    )
    spec["containers"] = [sidecar, *containers] if wiring.sidecar_first else [*containers, sidecar]
    spec.setdefault("volumes", []).extend(config_volumes(wiring.configmap, wiring.volume))


def service_account(name: str, namespace: str, labels: dict[str, str] | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}


# What GFD may do (v0.19.3 writes NodeFeature objects and reads its own pod for their owners):
# the device plugin chart's role.yml with GFD on; the GPU Operator splits it into a Role in its
# namespace (nodefeatures) and a ClusterRole (nodes, pods).
GFD_NODEFEATURE_RULE: Obj = {
    "apiGroups": ["nfd.k8s-sigs.io"],
    "resources": ["nodefeatures"],
    "verbs": ["get", "list", "watch", "create", "update"],
}
GFD_CLUSTER_RULES: tuple[Obj, ...] = (
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
)


def role_for(
    name: str, account: str, namespace: str, rules: Sequence[Obj], *, cluster: bool
) -> list[Obj]:
    """A (Cluster)Role with `rules` and its binding to ServiceAccount `account`."""
    kind = "ClusterRole" if cluster else "Role"
    meta: Obj = {"name": name} if cluster else {"name": name, "namespace": namespace}
    group = "rbac.authorization.k8s.io"
    role = {"apiVersion": f"{group}/v1", "kind": kind, "metadata": dict(meta), "rules": list(rules)}
    binding = {
        "apiVersion": f"{group}/v1",
        "kind": f"{kind}Binding",
        "metadata": dict(meta),
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        "roleRef": {"apiGroup": group, "kind": kind, "name": name},
    }
    return [role, binding]
