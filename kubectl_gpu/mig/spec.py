"""mig-parted config files (v1): the typed model, and the rules a JSON Schema cannot express.

Owns `MigConfigFile` / `MigDeviceSpec` (frozen values built by `from_dict` from a document
that passed validation), `check` for the config file and `check_hooks` /
`check_gpu_clients` for its two companion files (reference/mig.md §1, §3). The structure
(fields, types, required keys) is `schemas/mig-config.v1.json`'s job; the checks here run
on the same plain data even when the structure is broken, so they skip what has the wrong
shape and never raise. Must not decide whether a layout fits a GPU model (geometry), nor
read files. Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import types
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias

from kubectl_gpu import findings
from kubectl_gpu.errors import ConfigError, GpuError
from kubectl_gpu.findings import Finding, Path
from kubectl_gpu.mig import profiles
from kubectl_gpu.mig.profiles import MigProfile, ProfileError

CONFIGS = "mig-configs"
ALL: Final = "all"
Devices: TypeAlias = Literal["all"] | tuple[int, ...]

_HEX_ID = r"0[xX][0-9A-Fa-f]{8}"
_DEVICE_FILTER = re.compile(rf"{_HEX_ID}(?::{_HEX_ID})?")
_SHORT_HEX = re.compile(r"0[xX][0-9A-Fa-f]{1,8}")
_DECIMAL = re.compile(r"[1-9][0-9]{0,9}")
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_LABEL_MAX = 63
_PROFILE_HINT = (
    "write a profile name such as 1g.10gb, 3g.40gb, 1c.3g.40gb or 1g.10gb+me "
    "(nvidia-smi mig -lgip lists a GPU's profiles)"
)


class MigConfigNotFoundError(GpuError):
    """The config name asked for is not in the file."""


@dataclasses.dataclass(frozen=True)
class DeviceFilter:
    """A PCI ID filter: device+vendor (e.g. 0x20B010DE), optionally subsystem device+vendor."""

    device_id: int
    subsystem_id: int | None = None

    def matches(self, device_id: int, subsystem_id: int | None = None) -> bool:
        """True for a GPU with these IDs; all four halves must match when a subsystem is set."""
        if self.device_id != device_id:
            return False
        return self.subsystem_id is None or self.subsystem_id == subsystem_id


def parse_device_filter(text: str) -> DeviceFilter | None:
    """Parse `0x20B010DE` or `0x20B010DE:0x147E10DE`; None when it is not in that form."""
    if not _DEVICE_FILTER.fullmatch(text):
        return None
    primary, _, subsystem = text.partition(":")
    return DeviceFilter(int(primary, 16), int(subsystem, 16) if subsystem else None)


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
        parsed = (parse_device_filter(text) for text in self.device_filter)
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


def check(doc: Mapping[str, Any]) -> list[Finding]:
    """Every semantic problem in a mig-parted config document; never raises."""
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
            found.extend(_check_overlaps(path, specs))
    return found


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
        *_check_device_filter((*path, "device-filter"), spec.get("device-filter")),
        *_check_devices((*path, "devices"), spec.get("devices")),
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
    return _whole(value) is not None


def _whole(value: object) -> int | None:
    """A non-negative whole number as YAML may write it (7 or 7.0), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


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


# --- GPU selection: device-filter and devices ------------------------------------------------


def _check_device_filter(path: Path, value: object) -> list[Finding]:
    if isinstance(value, str):
        return [] if value == "" else _check_filter_text(path, value)
    if not isinstance(value, list):
        return []
    found: list[Finding] = []
    for index, item in enumerate(value):
        if isinstance(item, str):
            found.extend(_check_filter_text((*path, index), item))
    return found


def _check_filter_text(path: Path, text: str) -> list[Finding]:
    if _DEVICE_FILTER.fullmatch(text):
        return []
    read = _as_mig_parted_reads(text)
    if read is not None and read[0] >> 16:
        canonical = ":".join(f"0x{part:08X}" for part in read)
        return [
            findings.warning(
                path,
                "mig.device-filter-form",
                f"device-filter '{text}' is not written as 0x and 8 hex digits; mig-parted "
                f"reads it as {canonical}, which no config NVIDIA ships spells this way",
                f"write '{canonical}'",
            )
        ]
    return [
        findings.error(
            path,
            "mig.bad-device-filter",
            f"device-filter '{text}' is not a PCI ID: expected 0x<device><vendor> as 8 hex "
            "digits (e.g. 0x20B010DE), optionally followed by :0x<subsystem device><vendor>. "
            "mig-parted does not report a filter it cannot use: the spec silently matches no GPU",
            "find the ID with: nvidia-smi --query-gpu=pci.device_id --format=csv",
        )
    ]


def _as_mig_parted_reads(text: str) -> tuple[int, ...] | None:
    # mig-parted reads each half with Go's strconv.ParseUint(s, 0, 32): hex or decimal.
    parts = text.split(":")
    if len(parts) > 2:
        return None
    values: list[int] = []
    for part in parts:
        if _SHORT_HEX.fullmatch(part):
            values.append(int(part, 16))
        elif _DECIMAL.fullmatch(part) and int(part) < 2**32:
            values.append(int(part))
        else:
            return None
    return tuple(values)


def _check_devices(path: Path, value: object) -> list[Finding]:
    if not isinstance(value, list):
        return []
    if not value:
        return [
            findings.warning(
                path,
                "mig.no-devices",
                "devices: [] selects no GPU, so this spec does nothing",
                "list GPU indices, e.g. devices: [0, 1], write devices: all, or remove the spec",
            )
        ]
    found: list[Finding] = []
    seen: set[int] = set()
    for position, item in enumerate(value):
        index = _whole(item)
        if index is not None and index in seen:
            found.append(
                findings.warning(
                    (*path, position),
                    "mig.duplicate-device",
                    f"GPU {index} is listed twice in devices",
                    f"remove the second {index}",
                )
            )
        if index is not None:
            seen.add(index)
    return found


# --- specs of one config that select the same GPU --------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Selection:
    filters: frozenset[str]  # empty: every GPU model
    devices: frozenset[int] | None  # None: all

    def shared(self, other: _Selection) -> str:
        """The GPUs both certainly select, in words ("" when that is not certain)."""
        if self.filters != other.filters:
            return ""
        if self.devices is None or other.devices is None:
            common = self.devices if other.devices is None else other.devices
        else:
            common = self.devices & other.devices
            if not common:
                return ""
        gpus = "every GPU" if common is None else "GPU " + ", ".join(map(str, sorted(common)))
        if self.filters:
            return f"{gpus} with device-filter {', '.join(sorted(self.filters))}"
        return gpus


def _check_overlaps(path: Path, specs: Sequence[Any]) -> list[Finding]:
    earlier: list[tuple[int, _Selection]] = []
    found: list[Finding] = []
    for position, spec in enumerate(specs):
        selection = _selection(spec)
        if selection is None:
            continue
        clash = next(_shared(selection, earlier), None)
        if clash is not None:
            found.append(_overlap_finding((*path, position, "devices"), path[-1], *clash))
        earlier.append((position, selection))
    return found


def _shared(
    selection: _Selection, earlier: list[tuple[int, _Selection]]
) -> Iterator[tuple[int, str]]:
    for position, other in earlier:
        shared = selection.shared(other)
        if shared:
            yield position, shared


def _overlap_finding(path: Path, name: object, position: int, shared: str) -> Finding:
    return findings.warning(
        path,
        "mig.overlapping-specs",
        f"this spec and spec #{position + 1} of '{name}' both select {shared}; mig-parted "
        "applies every spec that selects a GPU in turn, so it applies the last one and the "
        "earlier one has no effect there",
        "give each GPU exactly one spec (split the devices lists or use device-filter)",
    )


def _selection(spec: object) -> _Selection | None:
    if not isinstance(spec, Mapping):
        return None
    filters = _filter_set(spec.get("device-filter"))
    devices = spec.get("devices")
    if filters is None:
        return None
    if devices == ALL:
        return _Selection(filters, None)
    if not isinstance(devices, list):
        return None
    indices = [_whole(d) for d in devices]
    if not indices or any(i is None for i in indices):
        return None
    return _Selection(filters, frozenset(i for i in indices if i is not None))


def _filter_set(value: object) -> frozenset[str] | None:
    """The filters as a comparable set; None when malformed or when it matches no GPU."""
    if value is None or value == "":
        return frozenset()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        return None
    usable = frozenset(i.upper() for i in items if _DEVICE_FILTER.fullmatch(i))
    if items and not usable:
        return None
    return usable


# --- the companion files: hooks and GPU clients ----------------------------------------------

# `apply` sets these for every hook from its own flags, over what the hook's envs say.
_MIG_PARTED_ENVS = frozenset(
    {
        "MIG_PARTED_CONFIG_FILE",
        "MIG_PARTED_SELECTED_CONFIG",
        "MIG_PARTED_HOOKS_FILE",
        "MIG_PARTED_SKIP_RESET",
        "MIG_PARTED_MODE_CHANGE_ONLY",
    }
)
_UNIT_SUFFIXES = (
    ".service", ".socket", ".target", ".device", ".mount", ".automount", ".swap", ".path",
    ".timer", ".slice", ".scope",
)  # fmt: skip


def check_hooks(doc: Mapping[str, Any]) -> list[Finding]:
    """Semantic problems in a mig-parted hooks file; never raises."""
    hooks = doc.get("hooks") if isinstance(doc, Mapping) else None
    if not isinstance(hooks, Mapping):
        return []
    found: list[Finding] = []
    for name, entries in hooks.items():
        if not isinstance(entries, list):
            continue
        for index, hook in enumerate(entries):
            envs = hook.get("envs") if isinstance(hook, Mapping) else None
            if isinstance(envs, Mapping):
                found.extend(_check_hook_envs(("hooks", name, index, "envs"), envs))
    return found


def _check_hook_envs(path: Path, envs: Mapping[Any, Any]) -> list[Finding]:
    return [
        dataclasses.replace(
            findings.warning(
                (*path, key),
                "mig.hook-env-overridden",
                f"mig-parted sets {key} for every hook from its own settings, so this value is "
                "never seen by the command",
                f"read {key} as mig-parted sets it, or use a variable name of your own",
            ),
            at_key=True,
        )
        for key in envs
        if key in _MIG_PARTED_ENVS
    ]


def check_gpu_clients(doc: Mapping[str, Any]) -> list[Finding]:
    """Semantic problems in a MIG manager GPU clients file; never raises."""
    services = doc.get("systemd-services") if isinstance(doc, Mapping) else None
    if not isinstance(services, list):
        return []
    found: list[Finding] = []
    seen: set[str] = set()
    for index, service in enumerate(services):
        if not isinstance(service, str) or not service.strip():
            continue
        path: Path = ("systemd-services", index)
        found.extend(_check_service(path, service.strip(), seen))
        seen.add(service.strip())
    return found


def _check_service(path: Path, service: str, seen: set[str]) -> list[Finding]:
    if "," in service:
        return [
            findings.error(
                path,
                "mig.gpu-client-comma",
                f"'{service}' contains a comma: the MIG manager joins the list with commas and "
                "splits it again, so it would stop and restart these as separate units",
                "list each service as its own item",
            )
        ]
    if service in seen:
        return [
            findings.warning(
                path,
                "mig.duplicate-gpu-client",
                f"'{service}' is listed twice",
                "remove the second entry",
            )
        ]
    if not service.endswith(_UNIT_SUFFIXES):
        return [
            findings.warning(
                path,
                "mig.gpu-client-not-unit",
                f"'{service}' is not a full systemd unit name: the MIG manager asks systemd over "
                "D-Bus, which (unlike systemctl) does not add '.service', so this service is "
                "never stopped",
                f"write '{service}.service'",
            )
        ]
    return []
