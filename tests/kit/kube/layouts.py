"""The three ways NVIDIA's device plugin is deployed, as the objects each puts in a cluster.

Owns `Layout` (the objects to create, in order, plus where the plugin and GFD pods live and how
to find them) and one builder per deployment, each taking the config ConfigMap's contents
(key → YAML text) and the default key (docs/upstream-facts.md P6, docs/upstream-facts.md M3.4):
(a) `gpu_operator`: namespace `gpu-operator`, the ClusterPolicy CRD, ConfigMap, and ClusterPolicy
`cluster-policy` with `spec.devicePlugin.config {name, default}`; the DaemonSets come from the
operator stand-in (operator.py);
(b) `helm`: release `nvdp` in `nvidia-device-plugin`: `nvdp-nvidia-device-plugin` (container
`nvidia-device-plugin-ctr`, sidecar and init config-manager, `<fullname>-configs` ConfigMap,
`checksum/config`) and the GFD DaemonSet with the same pod labels (the docs/upstream-facts.md P6
trap); (c) `static`: `nvidia-device-plugin-daemonset` in `kube-system`, `name:
nvidia-device-plugin-ds`, no config at all (configs are ignored); and `resolve` (a layout by
name, as `SimCluster` is asked for one). Must not create anything itself.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.kit.kube import manifests as m
from tests.kit.kube.objects import cluster_policy_crd

Obj = dict[str, Any]
CHART_VERSION = "0.20.0"


@dataclass(frozen=True)
class Layout:
    name: str
    namespace: str
    objects: tuple[Obj, ...]
    plugin_daemonset: str
    plugin_selector: str  # label selector of the plugin pods
    plugin_container: str
    config_map: str | None = None
    gfd_daemonset: str | None = None
    needs_operator: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)


def gpu_operator(
    configs: Mapping[str, str] | None = None,
    default: str | None = None,
    *,
    config_map: str = "time-slicing-config",
    mig_strategy: str = "single",
    namespace: str = "gpu-operator",
) -> Layout:
    """The GPU Operator with its ClusterPolicy; the operator stand-in renders the DaemonSets."""
    objects: list[Obj] = [m.namespace(namespace), cluster_policy_crd()]
    plugin: Obj = {
        "enabled": True,
        "repository": "nvcr.io/nvidia",
        "image": "k8s-device-plugin",
        "version": "v0.17.1",
    }
    if configs is not None:
        objects.append(m.configmap(config_map, namespace, configs))
        plugin["config"] = {"name": config_map, "default": default or ""}
    objects.append(_cluster_policy(plugin, mig_strategy))
    return Layout(
        "gpu-operator",
        namespace,
        tuple(objects),
        "nvidia-device-plugin-daemonset",
        "app=nvidia-device-plugin-daemonset",
        "nvidia-device-plugin",
        config_map if configs is not None else None,
        "gpu-feature-discovery",
        True,
    )


def _cluster_policy(plugin: Obj, mig_strategy: str) -> Obj:
    """ClusterPolicy `cluster-policy` as the operator's Helm chart installs it (trimmed)."""
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": {
            "operator": {"defaultRuntime": "containerd"},
            "daemonsets": {
                "priorityClassName": "system-node-critical",
                "tolerations": [dict(m.GPU_TOLERATION)],
                "updateStrategy": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": "1"},
            },
            "mig": {"strategy": mig_strategy},
            "devicePlugin": plugin,
            "gfd": {
                "enabled": True,
                "repository": "nvcr.io/nvidia",
                "image": "k8s-device-plugin",
                "version": "v0.17.1",
            },
            "migManager": {"enabled": True},
        },
    }


def _chart_labels(release: str) -> dict[str, str]:
    return {
        "helm.sh/chart": f"nvidia-device-plugin-{CHART_VERSION}",
        "app.kubernetes.io/name": "nvidia-device-plugin",
        "app.kubernetes.io/instance": release,
        "app.kubernetes.io/version": CHART_VERSION,
        "app.kubernetes.io/managed-by": "Helm",
    }


_CHART_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": "feature.node.kubernetes.io/pci-10de.present",
                            "operator": "In",
                            "values": ["true"],
                        }
                    ]
                },
                {
                    "matchExpressions": [
                        {
                            "key": "feature.node.kubernetes.io/cpu-model.vendor_id",
                            "operator": "In",
                            "values": ["NVIDIA"],
                        }
                    ]
                },
                {
                    "matchExpressions": [
                        {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}
                    ]
                },
            ]
        }
    }
}


def _chart_pod(release: str, main: Obj, volumes: list[Obj]) -> Obj:
    return {
        "priorityClassName": "system-node-critical",
        "securityContext": {},
        "serviceAccountName": f"{release}-nvidia-device-plugin-service-account",
        "containers": [main],
        "volumes": volumes,
        "affinity": json.loads(json.dumps(_CHART_AFFINITY)),
        "tolerations": [
            {"key": "CriticalAddonsOnly", "operator": "Exists"},
            dict(m.GPU_TOLERATION),
        ],
    }


@dataclass(frozen=True)
class _Chart:
    """The chart values that matter here, and what the chart derives from them."""

    release: str
    namespace: str
    configs: Mapping[str, str] | None
    default: str
    fallbacks: str
    env: Mapping[str, str]

    @property
    def fullname(self) -> str:
        return f"{self.release}-nvidia-device-plugin"

    @property
    def configmap(self) -> str | None:
        return f"{self.fullname}-configs" if self.configs else None

    @property
    def selector(self) -> dict[str, str]:
        return {
            "app.kubernetes.io/name": "nvidia-device-plugin",
            "app.kubernetes.io/instance": self.release,
        }

    def daemonset(self, name: str, spec: Obj) -> Obj:
        notes = {}
        if self.configs:
            # checksum/config only for an embedded config.map (docs/upstream-facts.md P3.1): an
            # upgrade rolls pods.
            digest = hashlib.sha256(json.dumps(dict(self.configs), sort_keys=True).encode())
            notes["checksum/config"] = digest.hexdigest()
        labels = _chart_labels(self.release)
        return m.daemonset(
            name,
            self.namespace,
            selector=self.selector,
            labels=labels,
            pod_spec=spec,
            annotations=notes,
        )

    def wire_config_manager(self, spec: Obj, main: Obj, program: str) -> None:
        if self.configmap:
            wiring = m.ConfigWiring(
                self.configmap,
                self.default,
                self.fallbacks,
                program,
                prefix=program,
                sidecar_first=True,
            )
            m.with_config_manager(spec, main["name"], wiring)


def helm(
    configs: Mapping[str, str] | None = None,
    default: str | None = None,
    *,
    release: str = "nvdp",
    namespace: str = "nvidia-device-plugin",
    fallback_strategies: str = "named,single",
    env: Mapping[str, str] | None = None,
) -> Layout:
    """`helm install nvdp nvdp/nvidia-device-plugin --set-file config.map.KEY=…` with GFD on."""
    chart = _Chart(release, namespace, configs, default or "", fallback_strategies, env or {})
    account = m.service_account(
        f"{release}-nvidia-device-plugin-service-account", namespace, _chart_labels(release)
    )
    objects: list[Obj] = [m.namespace(namespace), account]
    if chart.configmap and configs:
        objects.append(m.configmap(chart.configmap, namespace, configs, _chart_labels(release)))
    objects += m.role_for(
        f"{chart.fullname}-role", account["metadata"]["name"], namespace,
        [*m.GFD_CLUSTER_RULES[:1], m.GFD_NODEFEATURE_RULE, *m.GFD_CLUSTER_RULES[1:]], cluster=True,
    )  # fmt: skip
    objects += [_helm_plugin(chart), _helm_gfd(chart)]
    selector = ",".join(f"{k}={v}" for k, v in chart.selector.items())
    return Layout(
        "helm",
        namespace,
        tuple(objects),
        chart.fullname,
        selector,
        "nvidia-device-plugin-ctr",
        chart.configmap,
        f"{chart.fullname}-gpu-feature-discovery",
        extra={"release": release},
    )


def _helm_plugin(chart: _Chart) -> Obj:
    main: Obj = {
        "name": "nvidia-device-plugin-ctr",
        "image": m.PLUGIN_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": ["nvidia-device-plugin"],
        "env": m.env({"MPS_ROOT": "/run/nvidia/mps", **chart.env}),
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [
            {"name": "kubelet-device-plugins-dir", "mountPath": "/var/lib/kubelet/device-plugins"},
            {"name": "mps-shm", "mountPath": "/dev/shm"},
            {"name": "mps-root", "mountPath": "/mps"},
            {"name": "cdi-root", "mountPath": "/var/run/cdi"},
        ],
    }
    volumes = [
        m.host_path("kubelet-device-plugins-dir", "/var/lib/kubelet/device-plugins", "Directory"),
        m.host_path("mps-root", "/run/nvidia/mps", "DirectoryOrCreate"),
        m.host_path("mps-shm", "/run/nvidia/mps/shm"),
        m.host_path("cdi-root", "/var/run/cdi", "DirectoryOrCreate"),
    ]
    spec = _chart_pod(chart.release, main, volumes)
    chart.wire_config_manager(spec, main, "nvidia-device-plugin")
    if chart.configmap:
        m.set_env(main, {"NVIDIA_MIG_MONITOR_DEVICES": "all"})
    m.set_env(
        main, {"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}
    )
    return chart.daemonset(chart.fullname, spec)


def _helm_gfd(chart: _Chart) -> Obj:
    features = "/etc/kubernetes/node-feature-discovery/features.d"
    main: Obj = {
        "name": "gpu-feature-discovery-ctr",
        "image": m.PLUGIN_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": ["gpu-feature-discovery"],
        "env": [
            dict(m.NODE_NAME_ENV),
            *m.env({k: v for k, v in chart.env.items() if k == "MIG_STRATEGY"}),
        ],
        "securityContext": {"privileged": True},
        "volumeMounts": [
            {"name": "output-dir", "mountPath": features},
            {"name": "host-sys", "mountPath": "/sys"},
        ],
    }
    volumes = [
        m.host_path("output-dir", features, "DirectoryOrCreate"),
        m.host_path("host-sys", "/sys", "Directory"),
    ]
    spec = _chart_pod(chart.release, main, volumes)
    chart.wire_config_manager(spec, main, "gpu-feature-discovery")
    return chart.daemonset(f"{chart.fullname}-gpu-feature-discovery", spec)


def static(configs: Mapping[str, str] | None = None, default: str | None = None) -> Layout:
    """`kubectl create -f nvidia-device-plugin.yml`: no ConfigMap, so `configs` are ignored."""
    main = {
        "name": "nvidia-device-plugin-ctr",
        "image": m.PLUGIN_IMAGE,
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"}],
    }
    spec = {
        "tolerations": [dict(m.GPU_TOLERATION)],
        "priorityClassName": "system-node-critical",
        "containers": [main],
        "volumes": [m.host_path("device-plugin", "/var/lib/kubelet/device-plugins", "Directory")],
    }
    selector = {"name": "nvidia-device-plugin-ds"}
    ds = m.daemonset(
        "nvidia-device-plugin-daemonset", "kube-system", selector=selector, labels={}, pod_spec=spec
    )
    del ds["metadata"]["labels"]
    ds["spec"]["updateStrategy"] = {"type": "RollingUpdate"}
    return Layout(
        "static",
        "kube-system",
        (ds,),
        "nvidia-device-plugin-daemonset",
        "name=nvidia-device-plugin-ds",
        "nvidia-device-plugin-ctr",
    )


LAYOUTS: dict[str, Callable[..., Layout]] = {
    "gpu-operator": gpu_operator,
    "helm": helm,
    "static": static,
}


def resolve(
    layout: str | Layout | None, configs: Mapping[str, str] | None, default: str | None
) -> Layout | None:
    """The layout a cluster is asked for: one already made, or one of `LAYOUTS` by name with
    `configs` and the `default` config key."""
    if layout is None or isinstance(layout, Layout):
        return layout
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
    return LAYOUTS[layout](dict(configs) if configs is not None else None, default)
