"""The `flags` section of a device-plugin config: fields, defaults, env overrides, enum checks.

Owns the field table of docs/upstream-facts.md P1.3 (names, JSON types, CLI defaults, env var
names), Go `encoding/json`-like decoding of one struct (case-insensitive keys, last duplicate wins,
unknown keys ignored, type errors worded like Go's), the env-over-file precedence of
docs/upstream-facts.md P1.1 and the enum validation of docs/upstream-facts.md P1.7. Must not read
files or know about sharing (pluginconfig.py).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any


class DecodeError(Exception):
    """A JSON decoding or flag error, worded as the Go code words it."""


_PLUGIN = {
    "passDeviceSpecs": (bool, False),
    "deviceListStrategy": (list, ["envvar"]),
    "deviceIDStrategy": (str, "uuid"),
    "cdiAnnotationPrefix": (str, "cdi.k8s.io/"),
    "nvidiaCTKPath": (str, "/usr/bin/nvidia-ctk"),
    "containerDriverRoot": (str, "/driver-root"),
    "sharedDevicesAllocationPolicy": (str, "distributed"),
}
_GFD = {
    "oneshot": (bool, False),
    "noTimestamp": (bool, False),
    "sleepInterval": (str, "60s"),
    "outputFile": (str, "/etc/kubernetes/node-feature-discovery/features.d/gfd"),
    "machineTypeFile": (str, "/sys/class/dmi/id/product_name"),
}
_FLAGS = {
    "migStrategy": (str, "none"),
    "failOnInitError": (bool, True),
    "mpsRoot": (str, ""),
    "nvidiaDriverRoot": (str, "/"),
    "nvidiaDevRoot": (str, ""),
    "gdrcopyEnabled": (bool, False),
    "gdsEnabled": (bool, False),
    "mofedEnabled": (bool, False),
    "useNodeFeatureAPI": (bool, True),
    "deviceDiscoveryStrategy": (str, "auto"),
}
DEFAULTS: dict[str, Any] = {
    **{k: v for k, (_, v) in _FLAGS.items()},
    "plugin": {k: v for k, (_, v) in _PLUGIN.items()},
    "gfd": {k: v for k, (_, v) in _GFD.items()},
}
# Env var → (section or "", field, kind). Precedence CLI > env > file (docs/upstream-facts.md P1.1).
ENV = {
    "MIG_STRATEGY": ("", "migStrategy", str),
    "FAIL_ON_INIT_ERROR": ("", "failOnInitError", bool),
    "MPS_ROOT": ("", "mpsRoot", str),
    "NVIDIA_DRIVER_ROOT": ("", "nvidiaDriverRoot", str),
    "NVIDIA_DEV_ROOT": ("", "nvidiaDevRoot", str),
    "GDRCOPY_ENABLED": ("", "gdrcopyEnabled", bool),
    "GDS_ENABLED": ("", "gdsEnabled", bool),
    "MOFED_ENABLED": ("", "mofedEnabled", bool),
    "DEVICE_DISCOVERY_STRATEGY": ("", "deviceDiscoveryStrategy", str),
    "PASS_DEVICE_SPECS": ("plugin", "passDeviceSpecs", bool),
    "DEVICE_LIST_STRATEGY": ("plugin", "deviceListStrategy", list),
    "DEVICE_ID_STRATEGY": ("plugin", "deviceIDStrategy", str),
    "CDI_ANNOTATION_PREFIX": ("plugin", "cdiAnnotationPrefix", str),
    "NVIDIA_CDI_HOOK_PATH": ("plugin", "nvidiaCTKPath", str),
    "CONTAINER_DRIVER_ROOT": ("plugin", "containerDriverRoot", str),
    "SHARED_DEVICES_ALLOCATION_POLICY": ("plugin", "sharedDevicesAllocationPolicy", str),
    "GFD_SLEEP_INTERVAL": ("gfd", "sleepInterval", str),
    "GFD_NO_TIMESTAMP": ("gfd", "noTimestamp", bool),
}
_GO_TYPES = {bool: "bool", str: "string", int: "int", list: "[]string", dict: "map"}
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "null"


def typed(value: Any, kind: type, path: str) -> Any:
    """`value` if it decodes into Go type `kind` (None: unset), else Go's type error."""
    if value is None:
        return None
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if not ok:
        raise DecodeError(
            f"json: cannot unmarshal {json_type(value)} into Go struct field {path} of type "
            f"{_GO_TYPES.get(kind, kind.__name__)}"
        )
    return value


def fold(raw: Mapping[str, Any], fields: tuple[str, ...], struct: str) -> dict[str, Any]:
    """Keys of a Go struct decoded by encoding/json: case-insensitive, last one wins."""
    by_lower = {name.lower(): name for name in fields}
    found: dict[str, Any] = {}
    for key, value in raw.items():
        name = by_lower.get(str(key).lower())
        if name is not None:
            found[name] = value
    return found


def decode_flags(raw: Any) -> dict[str, Any]:
    flags = copy.deepcopy(DEFAULTS)
    given = fold(typed(raw, dict, "Config.flags") or {}, (*_FLAGS, "plugin", "gfd"), "Flags")
    for name, (kind, _) in _FLAGS.items():
        value = typed(given.get(name), kind, f"Flags.flags.{name}")
        if value is not None:
            flags[name] = value
    for section, table in (("plugin", _PLUGIN), ("gfd", _GFD)):
        block = fold(typed(given.get(section), dict, f"Flags.{section}") or {}, tuple(table), "")
        for name, (kind, _) in table.items():
            value = _section_value(block.get(name), kind, f"{section}.{name}")
            if value is not None:
                flags[section][name] = value
    return flags


def _section_value(value: Any, kind: type, path: str) -> Any:
    if path == "plugin.deviceListStrategy" and isinstance(value, str):
        return [value]  # one string is one name, commas and all (docs/upstream-facts.md P1.3)
    if path == "gfd.sleepInterval" and isinstance(value, (int, float)):
        return str(value)  # a number of nanoseconds
    return typed(value, kind, f"Flags.{path}")


def apply_env(flags: dict[str, Any], env: Mapping[str, str]) -> None:
    """Env vars set on the container win over the file (docs/upstream-facts.md P1.1)."""
    for var, (section, name, kind) in ENV.items():
        text = env.get(var)
        if not text:
            continue
        target = flags[section] if section else flags
        if kind is bool:
            if text not in _TRUE | _FALSE:
                raise DecodeError(f'could not parse "{text}" as bool value from env {var}')
            target[name] = text in _TRUE
        elif kind is list:
            target[name] = [part.strip() for part in text.split(",") if part.strip()]
        else:
            target[name] = text


def validate_enums(flags: Mapping[str, Any]) -> None:
    plugin = flags["plugin"]
    if flags["migStrategy"] not in ("none", "single", "mixed"):
        raise DecodeError(f"unknown MIG strategy: {flags['migStrategy']}")
    for strategy in plugin["deviceListStrategy"]:
        allowed = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
        if not isinstance(strategy, str) or strategy not in allowed:
            raise DecodeError(
                f"invalid --device-list-strategy option: invalid strategy: {strategy}"
            )
    if plugin["deviceIDStrategy"] not in ("uuid", "index"):
        raise DecodeError(f"invalid --device-id-strategy option: {plugin['deviceIDStrategy']}")
    if flags["deviceDiscoveryStrategy"] not in ("auto", "nvml", "tegra"):
        raise DecodeError(
            f"invalid --device-discovery-strategy option {flags['deviceDiscoveryStrategy']}"
        )
    policy = plugin["sharedDevicesAllocationPolicy"]
    if policy not in ("distributed", "packed"):
        raise DecodeError(f"invalid --shared-devices-allocation-policy option: {policy}")


def duration_seconds(text: str) -> float | None:
    """A Go duration ("60s", "1m30s"), a number of nanoseconds, or "infinite" (None)."""
    if text == "infinite":
        return None
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text) * 1e-9
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return 60.0  # GFD refuses to start on a bad duration; the plugin ignores it
    return sum(float(number) * _UNITS[unit] for number, unit in parts)
