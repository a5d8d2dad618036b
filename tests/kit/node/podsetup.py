"""Reading a plugin or GFD pod spec the way its processes see it, and config-manager's choice.

Owns `ProgramSetup` (which container runs the program, its literal env, its config-manager
init container and sidecar with their env, the ConfigMap mounted at `/available-configs`, a
`CONFIG_FILE` pointing straight into a ConfigMap volume) and `select_config`, config-manager's
`updateConfigName` (docs/upstream-facts.md P3.2: label, else DEFAULT_CONFIG, else
FALLBACK_STRATEGIES named / single / empty), with its error wording. Must not keep state or read
the store.
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
EMPTY = ""  # config-manager's "empty" fallback links /dev/null
CONFIG_LABEL = "nvidia.com/device-plugin.config"


class SelectionError(Exception):
    """config-manager logs this and exits 1 (docs/upstream-facts.md P3.2)."""


@dataclass(frozen=True)
class ManagerEnv:
    """config-manager's settings, from its container's env (Helm and operator set them all)."""

    node_label: str = CONFIG_LABEL
    srcdir: str = "/available-configs"
    dst: str = "/config/config.yaml"
    default: str = ""
    fallbacks: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProgramSetup:
    """How one program (plugin or GFD) is wired into its pod."""

    main: str  # container name
    env: Mapping[str, str]
    init: str | None = None  # config-manager init container (ONESHOT=true)
    sidecar: str | None = None  # config-manager sidecar (ONESHOT=false, SIGHUPs the program)
    manager: ManagerEnv | None = None
    configmap: str | None = None  # mounted at manager.srcdir, or the one CONFIG_FILE points into
    configmap_optional: bool = False
    config_file: str = ""  # CONFIG_FILE / --config-file; "" means no file, built-in defaults
    direct_key: str | None = None  # key CONFIG_FILE names inside a directly mounted ConfigMap


def literal_env(container: Obj) -> dict[str, str]:
    """Env vars with literal values (valueFrom ones are node/pod facts the sim does not need)."""
    return {
        str(e["name"]): str(e.get("value", ""))
        for e in container.get("env") or []
        if "valueFrom" not in e
    }


def command_line(container: Obj) -> list[str]:
    return [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]


def runs(container: Obj, program: str) -> bool:
    """Whether a container runs `program` (by argv[0] or by a `-c` script line naming it)."""
    argv = command_line(container)
    return bool(argv) and (posixpath.basename(argv[0]) == program or f"exec {program}" in argv[-1])


def find_main(pod: Obj, names: Collection[str], program: str) -> Obj | None:
    for container in (pod.get("spec") or {}).get("containers") or []:
        if container.get("name") in names or runs(container, program):
            return dict(container)
    return None


def setup_of(pod: Obj, main: Obj) -> ProgramSetup:
    spec = pod.get("spec") or {}
    env = literal_env(main)
    init = next((c for c in spec.get("initContainers") or [] if runs(c, "config-manager")), None)
    sidecar = next((c for c in spec.get("containers") or [] if runs(c, "config-manager")), None)
    config_file = env.get("CONFIG_FILE", "") or _flag(command_line(main), "--config-file")
    manager_container = sidecar or init
    if manager_container is None:
        configmap, optional, key = _direct_mount(spec, main, config_file)
        return ProgramSetup(
            main["name"], env, None, None, None, configmap, optional, config_file, key
        )
    manager = _manager_env(literal_env(manager_container))
    configmap, optional = _mounted_configmap(spec, manager_container, manager.srcdir)
    return ProgramSetup(
        main["name"],
        env,
        init["name"] if init else None,
        sidecar["name"] if sidecar else None,
        manager,
        configmap,
        optional,
        config_file,
    )


def _flag(argv: list[str], name: str) -> str:
    for index, arg in enumerate(argv):
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
        if arg == name and index + 1 < len(argv):
            return argv[index + 1]
    return ""


def _manager_env(env: Mapping[str, str]) -> ManagerEnv:
    fallbacks = tuple(p.strip() for p in env.get("FALLBACK_STRATEGIES", "").split(",") if p.strip())
    return ManagerEnv(
        node_label=env.get("NODE_LABEL") or CONFIG_LABEL,
        srcdir=env.get("CONFIG_FILE_SRCDIR") or "/available-configs",
        dst=env.get("CONFIG_FILE_DST") or "/config/config.yaml",
        default=env.get("DEFAULT_CONFIG", ""),
        fallbacks=fallbacks,
    )


def _volume(spec: Obj, name: str) -> Obj:
    return next((v for v in spec.get("volumes") or [] if v.get("name") == name), {})


def _mounted_configmap(spec: Obj, container: Obj, path: str) -> tuple[str | None, bool]:
    for mount in container.get("volumeMounts") or []:
        if mount.get("mountPath") == path:
            source = _volume(spec, str(mount.get("name"))).get("configMap")
            if source:
                return str(source.get("name")), bool(source.get("optional"))
    return None, False


def _direct_mount(spec: Obj, main: Obj, config_file: str) -> tuple[str | None, bool, str | None]:
    """A CONFIG_FILE inside a ConfigMap volume mounted on the program itself (issue #615)."""
    if not config_file:
        return None, False, None
    for mount in main.get("volumeMounts") or []:
        source = _volume(spec, str(mount.get("name"))).get("configMap")
        path = str(mount.get("mountPath") or "")
        if not source:
            continue
        if mount.get("subPath") and path == config_file:
            return str(source["name"]), bool(source.get("optional")), str(mount["subPath"])
        if not mount.get("subPath") and posixpath.dirname(config_file) == path.rstrip("/"):
            key = posixpath.basename(config_file)
            return str(source["name"]), bool(source.get("optional")), key
    return None, False, None


def select_config(keys: Collection[str], label: str, manager: ManagerEnv) -> str:
    """The key config-manager links (EMPTY for /dev/null), or SelectionError (docs/upstream-facts.md
    P3.2)."""
    available = sorted(k for k in keys if not k.startswith(".."))
    if not available:
        raise SelectionError("no configuration files available")
    if label:
        if label not in available:
            raise SelectionError(f"specified config {label} does not exist")
        return label
    if manager.default:
        if manager.default not in available:
            # Upstream prints the (empty) label value here, not the default's name.
            raise SelectionError(f"specified config {label} does not exist")
        return manager.default
    return _fallback(available, manager.fallbacks)


def _fallback(available: list[str], fallbacks: tuple[str, ...]) -> str:
    """FALLBACK_STRATEGIES, in order: named (a key `default`), single (one key), empty."""
    for fallback in fallbacks:
        if fallback == "named" and "default" in available:
            return "default"
        if fallback == "single" and len(available) == 1:
            return available[0]
        if fallback == "empty":
            return EMPTY
        if fallback not in ("named", "single", "empty"):
            raise SelectionError(f"unknown fallback strategy: {fallback}")
    raise SelectionError("no config was set, no default was provided, and all fallbacks failed")
