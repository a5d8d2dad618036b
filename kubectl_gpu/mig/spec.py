"""mig-parted config files (v1): the typed model, and the rules a JSON Schema cannot express.

Owns `MigConfigFile` / `MigDeviceSpec` (frozen values built by `from_dict` from a document
that passed validation) and `check` for the config file (docs/upstream-facts.md M1, M3): config
names, mig-enabled against mig-devices, and the profile names and counts in mig-devices. The
rules about which GPUs a spec selects live in selection.py, those for the two companion files
in companions.py. The structure (fields, types, required keys) is
`schemas/mig-config.v1.json`'s job; the checks here run on the same plain data even when the
structure is broken, so they skip what has the wrong shape and never raise. Must not decide
whether a layout fits a GPU model (geometry), nor read files. Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import types
from collections.abc import Mapping
from typing import Any

from kubectl_gpu import findings
from kubectl_gpu.errors import ConfigError, GpuError
from kubectl_gpu.findings import Finding, Path
from kubectl_gpu.mig import profiles, selection
from kubectl_gpu.mig.profiles import MigProfile, ProfileError

# Part of this module's model, defined with the selection rules; kept importable from here.
from kubectl_gpu.mig.selection import ALL as ALL
from kubectl_gpu.mig.selection import DeviceFilter as DeviceFilter
from kubectl_gpu.mig.selection import Devices as Devices
from kubectl_gpu.mig.selection import parse_device_filter as parse_device_filter

CONFIGS = "mig-configs"

_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_LABEL_MAX = 63
_PROFILE_HINT = (
    "write a profile name such as 1g.10gb, 3g.40gb, 1c.3g.40gb or 1g.10gb+me "
    "(nvidia-smi mig -lgip lists a GPU's profiles)"
)


class MigConfigNotFoundError(GpuError):
    """The config name asked for is not in the file."""


@dataclasses.dataclass(frozen=True)
class MigDeviceSpec:
    """One entry of a named config: which GPUs, which MIG mode, which instances on each.

    `device_filter` is empty for every GPU model. `mig_devices` holds each profile once,
    with the counts of names that mean the same profile summed and zero counts left out,
    in the order the file lists them.
    """

    devices: Devices
    device_filter: tuple[str, ...]
    mig_enabled: bool
    mig_devices: tuple[tuple[MigProfile, int], ...]

    def selects(self, index: int, device_id: int, subsystem_id: int | None = None) -> bool:
        """True when mig-parted applies this spec to the GPU at `index` with these PCI IDs."""
        if self.devices != ALL and index not in self.devices:
            return False
        if not self.device_filter:
            return True
        parsed = (selection.parse_device_filter(text) for text in self.device_filter)
        return any(f is not None and f.matches(device_id, subsystem_id) for f in parsed)


@dataclasses.dataclass(frozen=True)
class MigConfigFile:
    """A whole mig-parted config file: config name -> its specs, in file order."""

    configs: Mapping[str, tuple[MigDeviceSpec, ...]]

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> MigConfigFile:
        """Build the model from a document that `validate` found no error in."""
        try:
            configs = {
                str(name): tuple(_spec_from_dict(spec) for spec in specs)
                for name, specs in doc[CONFIGS].items()
            }
        except (KeyError, TypeError, AttributeError, ValueError, ArithmeticError) as e:
            raise ConfigError(
                f"not a valid mig-parted config ({type(e).__name__}: {e})",
                hint="run kubectl gpu validate -f FILE and fix the errors it lists",
            ) from e
        return cls(types.MappingProxyType(configs))

    @property
    def names(self) -> tuple[str, ...]:
        """The config names, in file order."""
        return tuple(self.configs)

    def select(self, name: str) -> tuple[MigDeviceSpec, ...]:
        """The specs of config `name`, as `nvidia-mig-parted apply -c NAME` would pick them."""
        if name in self.configs:
            return self.configs[name]
        close = difflib.get_close_matches(name, self.names, n=1)
        guess = f"did you mean '{close[0]}'? " if close else ""
        raise MigConfigNotFoundError(
            f"selected mig-config not present: {name}",
            hint=f"{guess}available: {', '.join(self.names)}",
        )


def _spec_from_dict(spec: Mapping[str, Any]) -> MigDeviceSpec:
    raw_devices = spec["devices"]
    if raw_devices != ALL and any(selection.whole(i) is None for i in raw_devices):
        # `true` is 1 to Python: an unchecked [true] would select GPU 1
        raise ValueError(f"devices must be 'all' or GPU indices, not {raw_devices!r:.60}")
    devices: Devices = ALL if raw_devices == ALL else tuple(int(i) for i in raw_devices)
    raw_filter = spec.get("device-filter") or ()
    device_filter = (raw_filter,) if isinstance(raw_filter, str) else tuple(raw_filter)
    counts: dict[MigProfile, int] = {}
    for name, count in (spec.get("mig-devices") or {}).items():
        if int(count) > 0:
            profile = profiles.parse(name)
            counts[profile] = counts.get(profile, 0) + int(count)
    return MigDeviceSpec(devices, device_filter, bool(spec["mig-enabled"]), tuple(counts.items()))


# --- check: the config file -----------------------------------------------------------------


# Spec fields mig-parted reads as unset when null (mig-enabled: null is false).
_NULL_MEANS = {"mig-devices": None, "device-filter": None, "mig-enabled": False}


def read(doc: object) -> tuple[object, list[Finding]]:
    """The document as mig-parted reads it: a null spec field is unset (mig-enabled false)."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get(CONFIGS), Mapping):
        return doc, []
    configs: Mapping[str, Any] = doc[CONFIGS]
    read_configs = {
        name: [_read_spec(spec) for spec in specs] if isinstance(specs, list) else specs
        for name, specs in configs.items()
    }
    return {**doc, CONFIGS: read_configs}, []


def _read_spec(spec: object) -> object:
    if not isinstance(spec, Mapping):
        return spec
    read_spec = {k: v for k, v in spec.items() if not (v is None and k in _NULL_MEANS)}
    for key, unset in _NULL_MEANS.items():
        if key in spec and spec[key] is None and unset is not None:
            read_spec[key] = unset
    return read_spec


def check(doc: Mapping[str, Any]) -> list[Finding]:
    """Every semantic problem in a mig-parted config document; never raises."""
    if isinstance(doc, Mapping) and CONFIGS not in doc:
        return [_no_configs()]
    configs = doc.get(CONFIGS) if isinstance(doc, Mapping) else None
    if not isinstance(configs, Mapping):
        return []
    found: list[Finding] = []
    for name, specs in configs.items():
        path: Path = (CONFIGS, name)
        found.extend(_check_config_name(path, name))
        if isinstance(specs, list):
            for index, spec in enumerate(specs):
                if isinstance(spec, Mapping):
                    found.extend(_check_spec((*path, index), spec))
            found.extend(selection.check_overlaps(path, specs))
    return found


def _no_configs() -> Finding:
    """mig-parted parses a file without mig-configs, but no config can be selected from it."""
    return findings.warning(
        (CONFIGS,),
        "mig.no-configs",
        "no mig-configs: mig-parted reads this file, but nvidia-mig-parted apply -c NAME "
        '(and the MIG manager) then fails with "selected mig-config not present: NAME"',
        "add a mig-configs mapping of config names to lists of specs",
    )


def _check_config_name(path: Path, name: object) -> list[Finding]:
    if not isinstance(name, str):
        return []
    if len(name) <= _LABEL_MAX and _LABEL_VALUE.fullmatch(name):
        return []
    problem = findings.warning(
        path,
        "mig.config-name-not-label",
        f"config name '{name}' cannot be a Kubernetes label value, so the label "
        f"nvidia.com/mig.config={name} can never select it (nvidia-mig-parted apply -c still can)",
        "use at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter "
        "or digit",
    )
    return [dataclasses.replace(problem, at_key=True)]


def _check_spec(path: Path, spec: Mapping[str, Any]) -> list[Finding]:
    return [
        *_check_mig_devices(path, spec),
        *_check_mode(path, spec),
        *selection.check_device_filter((*path, "device-filter"), spec.get("device-filter")),
        *selection.check_devices((*path, "devices"), spec.get("devices")),
    ]


def _check_mode(path: Path, spec: Mapping[str, Any]) -> list[Finding]:
    enabled = spec.get("mig-enabled")
    devices = spec.get("mig-devices")
    if enabled is True and "mig-devices" not in spec:
        return [
            findings.error(
                (*path, "mig-enabled"),
                "mig.missing-mig-devices",
                "missing required field 'mig-devices' when 'mig-enabled' is true",
                "add mig-devices: {} to enable MIG without instances, or list the profiles, "
                'e.g. mig-devices: {"1g.10gb": 7}',
            )
        ]
    if enabled is False and isinstance(devices, Mapping) and devices:
        problem = findings.error(
            (*path, "mig-devices"),
            "mig.devices-when-disabled",
            "MIG devices included when 'mig-enabled' is false",
            "set mig-enabled: true to create these instances, or remove mig-devices",
        )
        return [dataclasses.replace(problem, at_key=True)]
    return []


# --- mig-devices: profile names and counts ---------------------------------------------------


def _check_mig_devices(path: Path, spec: Mapping[str, Any]) -> list[Finding]:
    devices = spec.get("mig-devices")
    if not isinstance(devices, Mapping):
        return []
    where: Path = (*path, "mig-devices")
    found: list[Finding] = []
    parsed: dict[str, MigProfile] = {}
    for key in devices:
        if not isinstance(key, str):
            continue
        try:
            parsed[key] = profiles.parse(key)
        except ProfileError as e:
            found.append(_profile_finding((*where, key), e))
            continue
        if parsed[key].name != key:
            found.append(_non_canonical((*where, key), key, parsed[key]))
    counts = {k: v for k, v in devices.items() if _is_count(v)}
    if len(counts) == len(devices) and counts:
        found.extend(_check_counts(where, counts, spec.get("mig-enabled") is False))
    found.extend(_check_media_extensions(where, parsed, counts))
    return found


def _is_count(value: object) -> bool:
    return selection.whole(value) is not None


def _profile_finding(path: Path, error: ProfileError) -> Finding:
    if error.upstream:
        problem = findings.error(
            path,
            "mig.bad-profile-format",
            "error validating values in 'mig-devices' field: "
            f"invalid format for '{error.profile}': {error.message}",
            _PROFILE_HINT,
        )
    else:
        problem = findings.error(
            path,
            "mig.impossible-profile",
            f"{error.message}. mig-parted accepts the name when it reads the file and fails "
            "only on the node, at worst silently (the GPU is cleared and nothing is created)",
            _PROFILE_HINT + "; -lcip lists compute-instance profiles",
        )
    return dataclasses.replace(problem, at_key=True)


def _non_canonical(path: Path, key: str, profile: MigProfile) -> Finding:
    problem = findings.warning(
        path,
        "mig.non-canonical-profile",
        f"'{key}' means the profile '{profile.name}', and mig-parted names the instances "
        f"'{profile.name}' when it reads them back, so `assert` never finds '{key}' and the "
        "MIG manager re-applies the config (destroying and re-creating every instance) "
        "each time it starts",
        f"write '{profile.name}'",
    )
    return dataclasses.replace(problem, at_key=True)


def _check_counts(where: Path, counts: Mapping[Any, Any], disabled: bool) -> list[Finding]:
    if not any(counts.values()):
        problem = findings.error(
            where,
            "mig.all-counts-zero",
            "error validating values in 'mig-devices' field: all counts for all MigProfiles are 0",
            "give at least one profile a count of 1 or more, or write mig-devices: {} "
            "to enable MIG without instances",
        )
        return [dataclasses.replace(problem, at_key=True)]
    if disabled:
        return []  # 'MIG devices included when mig-enabled is false' says it all
    return [
        findings.warning(
            (*where, key),
            "mig.zero-count",
            f"'{key}': 0 creates nothing, but mig-parted compares how many profiles are listed "
            "when it checks whether a config is applied, so `assert` never succeeds and the MIG "
            "manager re-applies the config (destroying and re-creating every instance) each "
            "time it starts",
            f"remove '{key}'",
        )
        for key, count in counts.items()
        if count == 0
    ]


def _check_media_extensions(
    where: Path, parsed: Mapping[str, MigProfile], counts: Mapping[Any, Any]
) -> list[Finding]:
    # Compute-instance profiles of one GPU instance share it, so count GPU instances:
    # at least ceil(compute slices asked / slices of the GPU instance) per +me profile.
    slices: dict[MigProfile, int] = {}
    over: str | None = None
    for key, profile in parsed.items():
        count = counts.get(key)
        if not profile.has_media_extensions or not count:
            continue
        gpu_instance = profile.gpu_instance
        slices[gpu_instance] = slices.get(gpu_instance, 0) + int(count) * profile.compute_slices
        if over is None and _instances(slices) > 1:
            over = key
    if over is None:
        return []
    asked = ", ".join(
        f"'{k}': {counts[k]}"
        for k, p in parsed.items()
        if k in counts and p.has_media_extensions and counts[k]
    )
    return [
        findings.error(
            (*where, over),
            "mig.too-many-me",
            f"this spec asks for {_instances(slices)} GPU instances with media extensions on "
            f"each GPU ({asked}), but a GPU has one set of media engines: at most one +me "
            "GPU instance per GPU",
            "keep one +me instance and use the plain profile (without +me) for the others",
        )
    ]


def _instances(slices: Mapping[MigProfile, int]) -> int:
    return sum(math.ceil(n / gpu_instance.gpu_slices) for gpu_instance, n in slices.items())
