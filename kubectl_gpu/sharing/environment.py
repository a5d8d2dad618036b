"""The env vars on the plugin container that win over the config file's flags.

Owns the table of env vars the device plugin reads instead of a flag (docs/upstream-facts.md
 P1.1, P1.3) and comparing them with a config's flags. Pure: standard
library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from kubectl_gpu.sharing.podtemplate import literal_env


class Deployment(Protocol):
    """What this module reads of a `deployment.Deployment` (which imports this module)."""

    @property
    def env_overrides(self) -> tuple[tuple[str, str], ...]: ...


# Env vars the plugin reads instead of the config file's flags, env → flag path
# (docs/upstream-facts.md P1.1, P1.3).
FLAG_ENV: dict[str, tuple[str, ...]] = {
    "MIG_STRATEGY": ("migStrategy",),
    "FAIL_ON_INIT_ERROR": ("failOnInitError",),
    "MPS_ROOT": ("mpsRoot",),
    "NVIDIA_DRIVER_ROOT": ("nvidiaDriverRoot",),
    "NVIDIA_DEV_ROOT": ("nvidiaDevRoot",),
    "GDRCOPY_ENABLED": ("gdrcopyEnabled",),
    "GDS_ENABLED": ("gdsEnabled",),
    "MOFED_ENABLED": ("mofedEnabled",),
    "DEVICE_DISCOVERY_STRATEGY": ("deviceDiscoveryStrategy",),
    "PASS_DEVICE_SPECS": ("plugin", "passDeviceSpecs"),
    "DEVICE_LIST_STRATEGY": ("plugin", "deviceListStrategy"),
    "DEVICE_ID_STRATEGY": ("plugin", "deviceIDStrategy"),
    "CDI_ANNOTATION_PREFIX": ("plugin", "cdiAnnotationPrefix"),
    "NVIDIA_CDI_HOOK_PATH": ("plugin", "nvidiaCTKPath"),
    "CONTAINER_DRIVER_ROOT": ("plugin", "containerDriverRoot"),
    "SHARED_DEVICES_ALLOCATION_POLICY": ("plugin", "sharedDevicesAllocationPolicy"),
}


def effective_flag(deployment: Deployment, flag: tuple[str, ...]) -> str | None:
    """The value an env var on the plugin container forces for `flag`, if any."""
    env = dict(deployment.env_overrides)
    for name, path in FLAG_ENV.items():
        if path == flag and name in env:
            return env[name]
    return None


def overridden_flags(
    deployment: Deployment, doc: Mapping[str, Any] | None
) -> list[tuple[str, str, str, Any]]:
    """(env var, its value, flag path, file value) for each flag the env contradicts."""
    env = dict(deployment.env_overrides)
    found = []
    for name, path in FLAG_ENV.items():
        value = _flag(doc, path)
        if name in env and value is not None and _as_env(value) != env[name].lower():
            found.append((name, env[name], ".".join(path), value))
    return found


def _flag(doc: Mapping[str, Any] | None, path: tuple[str, ...]) -> Any:
    value: Any = (doc or {}).get("flags")
    for part in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _as_env(value: Any) -> str:
    """A flag value as its env var spells it: lists comma-joined, booleans lowercase."""
    if isinstance(value, list):
        return ",".join(str(v) for v in value).lower()
    return str(value).lower()


def env_overrides(container: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in literal_env(container).items() if k in FLAG_ENV and v))
