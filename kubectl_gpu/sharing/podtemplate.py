"""The device plugin's DaemonSet, read raw: its pod template, containers and config mounts.

Owns recognising the plugin container (not GFD, MPS or config-manager), the ConfigMap that
config-manager mounts and selects keys from (with its DEFAULT_CONFIG and fallbacks), and the
GFD and MPS-daemon DaemonSets beside the plugin that read the same ConfigMap (docs/upstream-facts.md
 P3). Must not decide which deployment runs the plugin (`deployment.py`).
Pure: standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

OPERATOR_APP = "nvidia-device-plugin-daemonset"
OPERATOR_CONTAINER = "nvidia-device-plugin"
HELM_CONTAINER = "nvidia-device-plugin-ctr"
CONFIG_DIR = "/available-configs"
CHART_FALLBACKS = ("named", "single")  # config-manager's own default (docs/upstream-facts.md P3.1)
_COMPANION_MARKS = ("feature-discovery", "mps-control-daemon")


def plugin_container(pod_spec: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The container that runs the device plugin itself (not GFD, MPS or config-manager)."""
    containers = [c for c in pod_spec.get("containers") or [] if isinstance(c, Mapping)]
    for container in containers:
        if container.get("name") in (HELM_CONTAINER, OPERATOR_CONTAINER):
            return container
    for container in containers:
        command = [str(c) for c in container.get("command") or []][:1]
        if command and command[0].endswith("nvidia-device-plugin"):
            return container
    return None


def config_source(spec: Mapping[str, Any]) -> tuple[str, str, tuple[str, ...]] | None:
    """(ConfigMap, DEFAULT_CONFIG, fallbacks) when config-manager selects keys per node."""
    manager = next((c for c in _all_containers(spec) if _is_config_manager(c)), None)
    if manager is None:
        return None
    volumes = {v.get("name"): v for v in spec.get("volumes") or [] if isinstance(v, Mapping)}
    for mount in manager.get("volumeMounts") or []:
        source = (volumes.get(mount.get("name")) or {}).get("configMap") or {}
        if mount.get("mountPath") == CONFIG_DIR and source.get("name"):
            env = literal_env(manager)
            given = env.get("FALLBACK_STRATEGIES")
            fallbacks = tuple(s.strip() for s in given.split(",") if s.strip()) if given else None
            return str(source["name"]), env.get("DEFAULT_CONFIG", ""), fallbacks or CHART_FALLBACKS
    return None


def _is_config_manager(container: Mapping[str, Any]) -> bool:
    words = [str(w) for w in [*(container.get("command") or []), *(container.get("args") or [])]]
    return any(w.endswith("config-manager") for w in words) or "config-manager" in str(
        container.get("name", "")
    )


def companions(
    daemonsets: Sequence[Mapping[str, Any]], plugin: Mapping[str, Any], configmap: str
) -> tuple[str, ...]:
    """GFD and MPS-daemon DaemonSets beside the plugin that read the same ConfigMap."""
    namespace = metadata_of(plugin).get("namespace")
    found = []
    for daemonset in daemonsets:
        meta = metadata_of(daemonset)
        if meta.get("namespace") != namespace or meta.get("name") == metadata_of(plugin).get(
            "name"
        ):
            continue
        source = config_source(pod_spec(daemonset))
        name = str(meta.get("name", ""))
        if source and source[0] == configmap and any(m in name for m in _COMPANION_MARKS):
            found.append(name)
    return tuple(sorted(found))


def metadata_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def qualified_name(obj: Mapping[str, Any]) -> str:
    return f"{metadata_of(obj).get('namespace', '')}/{metadata_of(obj).get('name', '')}"


def pod_spec(daemonset: Mapping[str, Any]) -> Mapping[str, Any]:
    template = (daemonset.get("spec") or {}).get("template") or {}
    spec = template.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def template_labels(daemonset: Mapping[str, Any]) -> Mapping[str, str]:
    template = (daemonset.get("spec") or {}).get("template") or {}
    return (template.get("metadata") or {}).get("labels") or {}


def selector(daemonset: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    labels = ((daemonset.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return tuple(sorted((str(k), str(v)) for k, v in labels.items()))


def _all_containers(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    both = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    return [c for c in both if isinstance(c, Mapping)]


def literal_env(container: Mapping[str, Any]) -> dict[str, str]:
    """Literal env values (`valueFrom` cannot be known without the cluster: skipped)."""
    return {
        str(e["name"]): str(e["value"])
        for e in container.get("env") or []
        if isinstance(e, Mapping) and "name" in e and e.get("value") is not None
    }
