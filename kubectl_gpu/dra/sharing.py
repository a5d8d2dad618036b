"""NVIDIA's opaque DRA config (`resource.nvidia.com/v1beta1` GpuConfig and MigDeviceConfig):
the rules the driver applies when it decodes, normalises and validates a config on the node.

The driver decodes strictly (an unknown field is an error), accepts `sharing.strategy`
TimeSlicing or MPS, each behind an alpha feature gate that is off by default, and refuses
`mpsConfig` next to TimeSlicing and `timeSlicingConfig` next to MPS; a MigDeviceConfig has no
`timeSlicingConfig` at all. Its validating webhook is off by default, so these errors surface
only when the pod's `NodePrepareResources` fails. Must not know where the config sits in a
claim (the claim checks pass the path and the device kinds it applies to).
Pure: standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kubectl_gpu.dra import classes, quantity
from kubectl_gpu.dra.catalogue import find
from kubectl_gpu.findings import Finding, Path

DRIVER = "gpu.nvidia.com"
API_VERSION = "resource.nvidia.com/v1beta1"
# Kinds the driver's config scheme registers (the ComputeDomain ones belong to its other plugin).
KNOWN_KINDS = (
    "GpuConfig",
    "MigDeviceConfig",
    "VfioDeviceConfig",
    "ComputeDomainChannelConfig",
    "ComputeDomainDaemonConfig",
)
TIME_SLICING, MPS = "TimeSlicing", "MPS"
GATES = {TIME_SLICING: "TimeSlicingSettings", MPS: "MPSSupport"}
INTERVALS = ("Default", "Short", "Medium", "Long")

_FIELDS: dict[str, frozenset[str]] = {
    "GpuConfig": frozenset({"apiVersion", "kind", "sharing"}),
    "MigDeviceConfig": frozenset({"apiVersion", "kind", "sharing"}),
    "GpuConfig.sharing": frozenset({"strategy", "timeSlicingConfig", "mpsConfig"}),
    "MigDeviceConfig.sharing": frozenset({"strategy", "mpsConfig"}),
    "timeSlicingConfig": frozenset({"interval"}),
    "mpsConfig": frozenset(
        {
            "defaultActiveThreadPercentage",
            "defaultPinnedDeviceMemoryLimit",
            "defaultPerDevicePinnedMemoryLimit",
        }
    ),
}
_UUID = re.compile(r"^(GPU|MIG)-[0-9A-Fa-f-]{8,}$")


def check(parameters: Any, path: Path, devices: int | None = None) -> list[Finding]:
    """Every finding about one opaque `parameters` object meant for gpu.nvidia.com, which
    applies to `devices` devices (None: not known)."""
    if not isinstance(parameters, Mapping):
        return [_decoding(path, "parameters must be an object", "write parameters as a mapping")]
    kind, api_version = parameters.get("kind"), parameters.get("apiVersion")
    if api_version != API_VERSION or kind not in KNOWN_KINDS:
        return [_unknown_kind(path, api_version, kind)]
    if kind not in ("GpuConfig", "MigDeviceConfig"):
        return []  # vfio and compute-domain configs have no sharing to check
    found = _unknown_fields(parameters, str(kind), path)
    sharing = parameters.get("sharing")
    if sharing is None:
        return found
    if not isinstance(sharing, Mapping):
        return [*found, _decoding((*path, "sharing"), "sharing must be an object", "")]
    found += _unknown_fields(sharing, f"{kind}.sharing", (*path, "sharing"))
    return found + _sharing(sharing, str(kind), (*path, "sharing"), devices)


def kind_of(parameters: Any) -> str | None:
    """The config kind (GpuConfig, MigDeviceConfig, …) of well-formed parameters."""
    if isinstance(parameters, Mapping) and parameters.get("apiVersion") == API_VERSION:
        kind = parameters.get("kind")
        return kind if isinstance(kind, str) else None
    return None


def strategy_of(parameters: Any) -> str | None:
    """The sharing strategy a config selects (None: exclusive access)."""
    sharing = parameters.get("sharing") if isinstance(parameters, Mapping) else None
    strategy = sharing.get("strategy") if isinstance(sharing, Mapping) else None
    return strategy if isinstance(strategy, str) else None


def _sharing(
    sharing: Mapping[str, Any], kind: str, path: Path, devices: int | None
) -> list[Finding]:
    strategy = sharing.get("strategy")
    if strategy is not None and not isinstance(strategy, str):
        return [_decoding((*path, "strategy"), "strategy must be a string", "")]
    if not isinstance(strategy, str) or strategy not in GATES:
        # decoded (strictly) before the strategy is looked at
        return [
            *_inactive(sharing, kind, path, devices),
            find("dra.unknown-strategy", (*path, "strategy"), strategy=strategy or ""),
        ]
    upstream = (
        f'"{strategy}" is selected as the GPU sharing strategy, but the "{GATES[strategy]}" '
        "feature gate is not enabled"
    )
    found = [find("dra.feature-gate", (*path, "strategy"), gate=GATES[strategy], upstream=upstream)]
    other = MPS if strategy == TIME_SLICING else TIME_SLICING
    wrong = "mpsConfig" if strategy == TIME_SLICING else "timeSlicingConfig"
    # MigDeviceConfig's TimeSlicing getter checks nothing: its mpsConfig is ignored there.
    if wrong in sharing and wrong in _FIELDS[f"{kind}.sharing"] and kind == "GpuConfig":
        found.append(
            find(
                "dra.strategy-config-mismatch",
                (*path, wrong),
                at_key=True,
                config=_title(wrong),
                strategy=strategy,
                other=other,
            )
        )
    return found + _inactive(sharing, kind, path, devices, strategy)


def _inactive(
    sharing: Mapping[str, Any], kind: str, path: Path, devices: int | None, strategy: str = ""
) -> list[Finding]:
    """The strategy configs: each is decoded (strictly), only the active one is validated."""
    found = []
    if "timeSlicingConfig" in sharing and kind == "GpuConfig":
        active = strategy == TIME_SLICING
        found += _time_slicing(sharing["timeSlicingConfig"], (*path, "timeSlicingConfig"), active)
    if "mpsConfig" in sharing:
        found += _mps(sharing["mpsConfig"], (*path, "mpsConfig"), devices, strategy == MPS)
    return found


def _title(field: str) -> str:
    return field[0].upper() + field[1:]  # the driver's Go type names: MpsConfig, TimeSlicingConfig


def _time_slicing(config: Any, path: Path, active: bool) -> list[Finding]:
    if not isinstance(config, Mapping):
        return [_decoding(path, "timeSlicingConfig must be an object", "")]
    found = _unknown_fields(config, "timeSlicingConfig", path)
    interval = config.get("interval")
    if interval is not None and not isinstance(interval, str):
        return [*found, _decoding((*path, "interval"), "interval must be a string", "")]
    if not active:
        return found
    if interval is None:
        return [*found, find("dra.timeslicing-without-interval", path)]
    if interval not in INTERVALS:
        found.append(find("dra.unknown-interval", (*path, "interval"), interval=interval))
    return found


def _mps(config: Any, path: Path, devices: int | None, active: bool) -> list[Finding]:
    """`active`: MPS is the strategy, so the config is validated and its limits applied;
    otherwise it is only decoded (types, unknown fields, quantities that do not parse)."""
    if not isinstance(config, Mapping):
        return [_decoding(path, "mpsConfig must be an object", "")]
    found = _unknown_fields(config, "mpsConfig", path)
    percentage = config.get("defaultActiveThreadPercentage")
    if percentage is not None:
        found += _thread_percentage(percentage, (*path, "defaultActiveThreadPercentage"), active)
    if "defaultPinnedDeviceMemoryLimit" in config:
        found += _limit(
            config["defaultPinnedDeviceMemoryLimit"],
            (*path, "defaultPinnedDeviceMemoryLimit"),
            "defaultPinnedDeviceMemoryLimit",
            active=active,
        )
    per_device = config.get("defaultPerDevicePinnedMemoryLimit")
    if isinstance(per_device, Mapping):
        where = (*path, "defaultPerDevicePinnedMemoryLimit")
        found += _per_device(per_device, where, devices if active else None, active)
    elif per_device is not None:
        found.append(
            _decoding(
                (*path, "defaultPerDevicePinnedMemoryLimit"),
                "defaultPerDevicePinnedMemoryLimit must map device index or UUID to a quantity",
                "",
            )
        )
    return found


def _thread_percentage(value: Any, path: Path, active: bool) -> list[Finding]:
    if isinstance(value, bool) or not isinstance(value, int):
        return [_decoding(path, "defaultActiveThreadPercentage must be a whole number", "")]
    if not active:
        return []
    if value < 0:
        return [find("dra.thread-percentage", path, problem="negative")]
    if value > 100:
        return [find("dra.thread-percentage", path, problem="greater than 100")]
    return []


def _per_device(
    limits: Mapping[str, Any], path: Path, devices: int | None, active: bool
) -> list[Finding]:
    found = []
    for key, value in limits.items():
        if not active:
            found += _limit(value, (*path, key), f"the limit for device {key}", key, active=False)
            continue
        if str(key).isdigit() and devices is not None and int(key) >= devices:
            upstream = f"invalid device: invalid device index: {int(key)}"
            found.append(
                find("dra.memory-device-index", (*path, key), at_key=True, key=key,
                     devices=devices, upstream=upstream)
            )  # fmt: skip
        if not (str(key).isdigit() or _UUID.match(str(key))):
            upstream = f"invalid device: unable to parse key as an integer: {key}"
            found.append(
                find("dra.memory-device-key", (*path, key), at_key=True, key=key, upstream=upstream)
            )
        found += _limit(value, (*path, key), f"the limit for device {key}", key)
    return found


def _limit(
    value: Any, path: Path, what: str, key: str | None = None, *, active: bool = True
) -> list[Finding]:
    parsed = quantity.parse(value)
    if parsed is None:
        return [find("dra.memory-quantity", path, what=what, value=value)]
    if not active or quantity.whole_mebibytes(parsed) > 0:
        return []
    upstream = (
        f"invalid limit: default value set too low: {value}"
        if key is None
        else f"invalid limit: value set too low: {key}: {value}"
    )
    return [find("dra.memory-limit", path, what=what, value=value, upstream=upstream)]


def _unknown_fields(obj: Mapping[str, Any], where: str, path: Path) -> list[Finding]:
    known = _FIELDS[where]
    found = []
    for key in obj:
        if key in known:
            continue
        dotted = ".".join(str(p) for p in (*path[_parameters_depth(path) :], key))
        hint = _field_hint(where, str(key))
        upstream = f'strict decoding error: unknown field "{dotted}"'
        found.append(
            find(
                "dra.config-unknown-field",
                (*path, key),
                at_key=True,
                field=dotted,
                upstream=upstream,
                hint=hint,
            )
        )
    return found


def _parameters_depth(path: Path) -> int:
    """Where the parameters object starts in `path` (the driver names fields from there)."""
    return max((i + 1 for i, p in enumerate(path) if p == "parameters"), default=len(path))


def _field_hint(where: str, key: str) -> str:
    if where == "MigDeviceConfig.sharing" and key == "timeSlicingConfig":
        return (
            "remove timeSlicingConfig: a MIG device time-slices with the default interval "
            "(strategy: TimeSlicing alone)"
        )
    return "remove it or fix its spelling; known fields here: " + ", ".join(sorted(_FIELDS[where]))


def _unknown_kind(path: Path, api_version: Any, kind: Any) -> Finding:
    if api_version != API_VERSION:
        upstream = f'no kind "{kind}" is registered for version "{api_version}"'
        hint = f"use apiVersion: {API_VERSION}"
    else:
        upstream = f'no kind "{kind}" is registered for version "{API_VERSION}"'
        hint = "use kind: GpuConfig for whole GPUs or kind: MigDeviceConfig for MIG devices"
    return _decoding(path, upstream, hint)


def _decoding(path: Path, upstream: str, hint: str) -> Finding:
    return find("dra.config-decoding", path, upstream=upstream, hint=hint or "fix the type")


def device_for(kind: str) -> str | None:
    """The device type a config kind applies to (GpuConfig: gpu)."""
    return classes.DEVICE_FOR.get(kind)
