"""Where the NVIDIA device plugin runs and where its sharing config lives.

Owns detection (docs/architecture.md, "Where it runs"): from the raw ClusterPolicy and
DaemonSet objects, which deployment runs the plugin (the GPU Operator, NVIDIA's Helm chart, the
static manifest, or our own bundle), how to find its pods on a node, which ConfigMap and default
key it reads, its config-manager fallbacks and the env vars on the plugin container that win
over the file (docs/upstream-facts.md P1.1, P3, P6). When the deployment cannot take a
config, `DeploymentError` says exactly what to change. Must not read the cluster (callers pass
the objects) nor plan a change (rollout/ does). Reading the DaemonSet's pod template is
`podtemplate.py`'s, the env vars that win over flags `environment.py`'s; this module names
them all for its callers. Pure: standard library and kubectl_gpu.errors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from kubectl_gpu import errors, keys
from kubectl_gpu.sharing.environment import (
    FLAG_ENV,
    effective_flag,
    env_overrides,
    overridden_flags,
)
from kubectl_gpu.sharing.podtemplate import (
    CHART_FALLBACKS,
    CONFIG_DIR,
    HELM_CONTAINER,
    OPERATOR_APP,
    OPERATOR_CONTAINER,
    companions,
    config_source,
    metadata_of,
    plugin_container,
    pod_spec,
    qualified_name,
    selector,
    template_labels,
)

__all__ = [
    "CHART_FALLBACKS",
    "CONFIG_DIR",
    "DEFAULT_CONFIGMAP",
    "FLAG_ENV",
    "HELM_CONTAINER",
    "OPERATOR_APP",
    "OPERATOR_CONTAINER",
    "OPERATOR_FALLBACKS",
    "TITLES",
    "Deployment",
    "DeploymentError",
    "Found",
    "Kind",
    "Overrides",
    "detect",
    "effective_flag",
    "is_plugin_pod",
    "overridden_flags",
    "plugin_container",
    "running_plugins",
]

Kind = Literal["gpu-operator", "helm", "static", "bundle"]
TITLES: dict[Kind, str] = {
    "gpu-operator": "GPU Operator",
    "helm": "NVIDIA Helm chart",
    "static": "static manifest",
    "bundle": "kubectl gpu bundle",
}
DEFAULT_CONFIGMAP = "device-plugin-config"  # created when the operator references none
OPERATOR_FALLBACKS = ("empty",)  # the operator's FALLBACK_STRATEGIES (docs/upstream-facts.md P3.4)


class DeploymentError(errors.GpuError):
    """No device plugin was found, or the one found cannot take a sharing config."""


@dataclasses.dataclass(frozen=True)
class Overrides:
    """What the user said instead of detection: `-n`, `--configmap`."""

    namespace: str | None = None
    configmap: str | None = None


@dataclasses.dataclass(frozen=True)
class Deployment:
    """The device plugin as deployed: where its pods run and where its config lives."""

    kind: Kind
    namespace: str
    daemonset: str
    pod_selector: tuple[tuple[str, str], ...]
    container: str
    configmap: str  # the ConfigMap to write (in `namespace`)
    default_key: str  # the key unlabelled nodes read; "" when none is set
    fallback_strategies: tuple[str, ...]
    env_overrides: tuple[tuple[str, str], ...] = ()
    cluster_policy: str = ""  # GPU Operator: the ClusterPolicy's name
    policy_config: tuple[str, str] | None = None  # GPU Operator: its (config.name, default)
    companions: tuple[str, ...] = ()  # GFD / MPS daemon DaemonSets that read the same config
    configurable: bool = True  # False: no config-manager mounts a ConfigMap (plugin defaults)

    @property
    def selector(self) -> str:
        """The pod label selector, as `kubectl get pods -l` takes it."""
        return ",".join(f"{k}={v}" for k, v in self.pod_selector)

    @property
    def reads_configmap(self) -> bool:
        """Whether the running plugin already reads `configmap` (the operator may not yet)."""
        if self.kind != "gpu-operator":
            return self.configurable
        return self.policy_config is not None and self.policy_config[0] == self.configmap

    def describe(self) -> str:
        """One line for the user: what was found and where the config lives."""
        default = f"default key {self.default_key!r}" if self.default_key else "no default key"
        where = f"{TITLES[self.kind]} (DaemonSet {self.namespace}/{self.daemonset})"
        config = f"ConfigMap {self.namespace}/{self.configmap}"
        if not self.configurable:
            return f"device plugin: {where}; config: none (the plugin's defaults)"
        return f"device plugin: {where}; config: {config}, {default}"


def detect(
    cluster_policies: Sequence[Mapping[str, Any]],
    daemonsets: Sequence[Mapping[str, Any]],
    overrides: Overrides = Overrides(),
    *,
    reading: bool = False,
) -> Deployment:
    """The device-plugin deployment in these objects, or DeploymentError saying what to do.

    `reading`: the caller only looks (share show, doctor), so a plugin that takes no config
    is found as it is (`configurable` False) rather than refused with how to make it take one.
    """
    if overrides.namespace:
        daemonsets = [
            d for d in daemonsets if metadata_of(d).get("namespace") == overrides.namespace
        ]
    policy = next((p for p in cluster_policies if _plugin_enabled(p)), None)
    if policy is not None:
        return _operator(policy, daemonsets, overrides)
    found = [(kind, d) for d in daemonsets if (kind := _kind_of(d)) is not None]
    if not found:
        raise DeploymentError(
            "found no NVIDIA device plugin DaemonSet"
            + (f" in namespace {overrides.namespace}" if overrides.namespace else ""),
            hint="install it (GPU Operator, NVIDIA Helm chart or `kubectl gpu install`), "
            "or name its namespace with -n",
        )
    ranked = sorted(found, key=lambda item: _RANK[item[0]])
    best = [item for item in ranked if _RANK[item[0]] == _RANK[ranked[0][0]]]
    if len(best) > 1:
        names = ", ".join(qualified_name(d) for _, d in best)
        raise DeploymentError(
            f"found several device plugin DaemonSets: {names}",
            hint="choose one with -n NAMESPACE",
        )
    kind, daemonset = best[0]
    return _from_daemonset(kind, daemonset, daemonsets, overrides, reading)


_RANK: dict[Kind, int] = {"bundle": 0, "helm": 1, "static": 2, "gpu-operator": 3}


@dataclasses.dataclass(frozen=True)
class Found:
    """One device plugin running in the cluster, before asking whether it can take a config."""

    kind: Kind
    namespace: str
    name: str  # the DaemonSet's, or the ClusterPolicy's for the GPU Operator

    def describe(self) -> str:
        if self.kind == "gpu-operator":
            return f"{TITLES[self.kind]} (ClusterPolicy {self.name})"
        return f"{TITLES[self.kind]} (DaemonSet {self.namespace}/{self.name})"


def running_plugins(
    cluster_policies: Sequence[Mapping[str, Any]], daemonsets: Sequence[Mapping[str, Any]]
) -> tuple[Found, ...]:
    """Every device plugin deployment present, whether or not it reads a sharing config: the
    GPU Operator (a ClusterPolicy with the plugin enabled, where its DaemonSet runs) first."""
    found: list[Found] = []
    for policy in cluster_policies:
        if _plugin_enabled(policy):
            operands = (
                d for d in daemonsets if template_labels(d).get(keys.APP_LABEL) == OPERATOR_APP
            )
            operand = next(operands, None)
            namespace = str(metadata_of(operand).get("namespace", "")) if operand else ""
            found.append(Found("gpu-operator", namespace, str(metadata_of(policy).get("name", ""))))
    for daemonset in daemonsets:
        kind = _kind_of(daemonset)
        if kind is not None and "feature-discovery" not in str(metadata_of(daemonset).get("name")):
            meta = metadata_of(daemonset)
            found.append(Found(kind, str(meta.get("namespace", "")), str(meta.get("name", ""))))
    return tuple(found)


def is_plugin_pod(deployment: Deployment, pod: Mapping[str, Any]) -> bool:
    """Whether `pod` (already matched by the selector) is the plugin, not GFD or MPS
    (docs/upstream-facts.md P6)."""
    names = {c.get("name") for c in (pod.get("spec") or {}).get("containers") or []}
    owners = metadata_of(pod).get("ownerReferences") or []
    owned_by = {o.get("name") for o in owners if o.get("kind") == "DaemonSet"}
    return deployment.container in names and (not owned_by or deployment.daemonset in owned_by)


# ---- the GPU Operator ----------------------------------------------------------------------


def _operator(
    policy: Mapping[str, Any], daemonsets: Sequence[Mapping[str, Any]], overrides: Overrides
) -> Deployment:
    plugin = next(
        (d for d in daemonsets if template_labels(d).get(keys.APP_LABEL) == OPERATOR_APP), None
    )
    name = metadata_of(policy).get("name", "")
    if plugin is None:
        raise DeploymentError(
            f"ClusterPolicy {name} exists but no device plugin DaemonSet "
            f"({keys.APP_LABEL}={OPERATOR_APP}) was found",
            hint="check that spec.devicePlugin is enabled and the GPU Operator is running, "
            "or name the operator's namespace with -n",
        )
    config = ((policy.get("spec") or {}).get("devicePlugin") or {}).get("config") or {}
    current = (str(config.get("name") or ""), str(config.get("default") or ""))
    spec = pod_spec(plugin)
    container = plugin_container(spec) or {}
    return Deployment(
        kind="gpu-operator",
        namespace=str(metadata_of(plugin).get("namespace", "")),
        daemonset=str(metadata_of(plugin).get("name", "")),
        pod_selector=selector(plugin),
        container=str(container.get("name") or OPERATOR_CONTAINER),
        configmap=overrides.configmap or current[0] or DEFAULT_CONFIGMAP,
        default_key=current[1],
        fallback_strategies=OPERATOR_FALLBACKS,
        env_overrides=env_overrides(container),
        cluster_policy=str(name),
        policy_config=current if current[0] else None,
        companions=companions(daemonsets, plugin, current[0]),
    )


def _plugin_enabled(policy: Mapping[str, Any]) -> bool:
    plugin = (policy.get("spec") or {}).get("devicePlugin") or {}
    return plugin.get("enabled") is not False


# ---- Helm, static, bundle ------------------------------------------------------------------


def _kind_of(daemonset: Mapping[str, Any]) -> Kind | None:
    if plugin_container(pod_spec(daemonset)) is None:
        return None
    if template_labels(daemonset).get(keys.APP_LABEL) == OPERATOR_APP:
        return None  # the operator's, without its ClusterPolicy: leave it to the operator
    if metadata_of(daemonset).get("labels", {}).get(keys.MANAGED_BY_LABEL) == keys.MANAGED_BY_VALUE:
        return "bundle"
    if keys.APP_NAME_LABEL in template_labels(daemonset):
        return "helm"
    return "static"


def _from_daemonset(
    kind: Kind,
    daemonset: Mapping[str, Any],
    others: Sequence[Mapping[str, Any]],
    overrides: Overrides,
    reading: bool = False,
) -> Deployment:
    spec = pod_spec(daemonset)
    source = config_source(spec)
    if source is None and not reading:
        message, hint = _no_config_advice(kind, daemonset, overrides.configmap)
        raise DeploymentError(message, hint=hint)
    configmap, default_key, fallbacks = source or (overrides.configmap or DEFAULT_CONFIGMAP, "", ())
    if overrides.configmap and overrides.configmap != configmap:
        raise DeploymentError(
            f"DaemonSet {qualified_name(daemonset)} mounts ConfigMap {configmap}, not "
            f"{overrides.configmap}: the device plugin would never read {overrides.configmap}",
            hint=f"drop --configmap, or pass --configmap {configmap}",
        )
    container = plugin_container(spec) or {}
    return Deployment(
        kind=kind,
        namespace=str(metadata_of(daemonset).get("namespace", "")),
        daemonset=str(metadata_of(daemonset).get("name", "")),
        pod_selector=selector(daemonset),
        container=str(container.get("name", "")),
        configmap=configmap,
        default_key=default_key,
        fallback_strategies=fallbacks,
        env_overrides=env_overrides(container),
        companions=companions(others, daemonset, configmap),
        configurable=source is not None,
    )


def _no_config_advice(
    kind: Kind, daemonset: Mapping[str, Any], configmap: str | None
) -> tuple[str, str]:
    name, cm = qualified_name(daemonset), configmap or DEFAULT_CONFIGMAP
    message = (
        f"the device plugin DaemonSet {name} ({TITLES[kind]}) cannot take a sharing config: "
        "it mounts no ConfigMap through config-manager, so the plugin reads no config file"
    )
    if kind == "helm":
        release = template_labels(daemonset).get(keys.APP_INSTANCE_LABEL, "<release>")
        namespace = metadata_of(daemonset).get("namespace", "")
        return message, (
            f"create ConfigMap {cm} in {namespace} with a '{keys.DEFAULT_CONFIG_KEY}' key, then "
            f"`helm upgrade {release} nvdp/nvidia-device-plugin -n {namespace} --reuse-values "
            f"--set config.name={cm} --set config.default={keys.DEFAULT_CONFIG_KEY}`"
        )
    image = str((plugin_container(pod_spec(daemonset)) or {}).get("image", "<plugin image>"))
    return message, _static_instructions(cm, image)


def _static_instructions(configmap: str, image: str) -> str:
    return (
        f"edit the DaemonSet's pod template: (1) add volumes 'available-configs' "
        f"(configMap: {configmap}) and 'config' (emptyDir); (2) on container "
        f"{HELM_CONTAINER} set env CONFIG_FILE=/config/config.yaml and mount 'config' at "
        f"/config; (3) set shareProcessNamespace: true; (4) add an init container and a sidecar "
        f"running `config-manager` from {image}, both mounting 'available-configs' at "
        f"{CONFIG_DIR} and 'config' at /config, with env NODE_NAME (fieldRef spec.nodeName), "
        f"NODE_LABEL={keys.DEVICE_PLUGIN_CONFIG_LABEL}, CONFIG_FILE_SRCDIR={CONFIG_DIR}, "
        f"CONFIG_FILE_DST=/config/config.yaml, DEFAULT_CONFIG={keys.DEFAULT_CONFIG_KEY}, "
        "FALLBACK_STRATEGIES=named,single; ONESHOT=true on the init container; ONESHOT=false, "
        "SEND_SIGNAL=true, SIGNAL=1, PROCESS_TO_SIGNAL=nvidia-device-plugin on the sidecar; "
        "(5) let its service account get/list/watch nodes. Or install the NVIDIA Helm chart "
        f"with --set config.name={configmap}, or run `kubectl gpu install`"
    )
