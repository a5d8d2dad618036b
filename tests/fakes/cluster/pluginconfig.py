"""A lenient reader of device-plugin config files, written from docs/upstream-facts.md P1.

Owns what the real plugin accepts and rejects when it loads `/config/config.yaml`: YAML turned into
JSON, unknown keys ignored, struct keys (top level, `flags`, `flags.plugin`, `sharing`) matched
case-insensitively with the last duplicate winning (docs/upstream-facts.md P1.8), map-read keys
inside `timeSlicing`/`mps` and resource entries matched exactly, `devices`/`rename`/top-level
`resources` validated then thrown away (docs/upstream-facts.md P1.5), MPS winning over time-slicing
(P1.5), env vars on the plugin container overriding the file (docs/upstream-facts.md P1.1), and the
runtime validation errors that make the plugin exit 1 (docs/upstream-facts.md P1.7), worded as
upstream words them. GPU-dependent checks live in devices.py. Must not import kubectl_gpu: a
stand-in that shares the product's rules would prove nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from tests.fakes.cluster import pluginfields as f

MAX_CONFIG_BYTES = 1024 * 1024  # a ConfigMap cannot hold more
_PARSE = (
    "unable to finalize config: unable to parse config file: error parsing config file: "
    "unmarshal error: error unmarshaling JSON: while decoding JSON: "
)
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_DEVICE_FORMS = re.compile(
    r"(\d+|\d+:\d+|GPU-[0-9a-fA-F-]+|MIG-[0-9a-fA-F-]+|MIG-GPU-[^/]+/\d+/\d+)"
)


class ConfigError(Exception):
    """The plugin (or GFD) would log this and exit 1."""


@dataclass(frozen=True)
class Replicated:
    """One `sharing.*.resources[]` entry after upstream's normalisation."""

    name: str  # always nvidia.com/…
    replicas: int
    rename: str = ""  # "<name>.shared" under renameByDefault; custom renames are dropped


@dataclass(frozen=True)
class Sharing:
    strategy: str = "none"  # none | time-slicing | mps (docs/upstream-facts.md P1.5)
    resources: tuple[Replicated, ...] = ()
    fail_requests_greater_than_one: bool = False

    def replicas_of(self, resource: str) -> Replicated | None:
        found = [r for r in self.resources if r.name == resource]
        return found[-1] if found else None  # duplicates: undefined upstream; last wins here


@dataclass(frozen=True)
class PluginConfig:
    """The effective config the plugin runs with (its `Running with config:` line)."""

    flags: Mapping[str, Any] = field(default_factory=lambda: dict(f.DEFAULTS))
    sharing: Sharing = Sharing()

    @property
    def mig_strategy(self) -> str:
        return str(self.flags["migStrategy"])

    @property
    def fail_on_init_error(self) -> bool:
        return bool(self.flags["failOnInitError"])

    @property
    def allocation_policy(self) -> str:
        return str(self.flags["plugin"]["sharedDevicesAllocationPolicy"])

    @property
    def sleep_interval(self) -> float | None:
        """GFD's relabel interval in seconds; None for "infinite"."""
        return f.duration_seconds(self.flags["gfd"]["sleepInterval"])


def load(text: str | None, env: Mapping[str, str], *, gfd: bool = False) -> PluginConfig:
    """The config the plugin (or, with `gfd`, GFD) would run with, or ConfigError."""
    if text is not None and len(text.encode()) > MAX_CONFIG_BYTES:
        raise ConfigError("unable to load config: config file too large")
    document = _document(text)
    top = f.fold(document, ("version", "flags", "resources", "sharing", "imex"), "Config")
    try:
        version = f.typed(top.get("version"), str, "Config.version") or "v1"
        if version != "v1":
            raise f.DecodeError(f"unknown version: {version}")
        flags = f.decode_flags(top.get("flags"))
        sharing = _sharing(top.get("sharing"))
        _check_resources_block(top.get("resources"))
        imex = f.typed(top.get("imex"), dict, "Config.imex") or {}
    except f.DecodeError as exc:
        raise ConfigError(f"unable to load config: {_PARSE}{exc}") from None
    try:
        f.apply_env(flags, env)
    except f.DecodeError as exc:
        raise ConfigError(str(exc)) from None
    config = PluginConfig(flags, sharing)
    if not gfd:
        _validate(config, imex)
    return config


def _document(text: str | None) -> Any:
    if not text:
        return {}  # an empty file means the defaults (docs/upstream-facts.md P1.6)
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise ConfigError(
            "unable to load config: unable to finalize config: unable to parse config file: "
            f"error parsing config file: error converting YAML to JSON: yaml: {detail}"
        ) from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        kind = f.json_type(document)
        raise ConfigError(
            f"unable to load config: {_PARSE}json: cannot unmarshal {kind} into Go value of "
            "type v1.Config"
        )
    return document


def _sharing(raw: Any) -> Sharing:
    block = f.fold(f.typed(raw, dict, "Config.sharing") or {}, ("timeSlicing", "mps"), "Sharing")
    time_slicing = _replicated_block(block["timeSlicing"]) if "timeSlicing" in block else None
    mps = _replicated_block(block["mps"]) if block.get("mps") is not None else None
    if mps is not None:
        # MPS wins whenever the block is present; timeSlicing is dropped silently
        # (docs/upstream-facts.md P1.5).
        resources, fail_default, strategy = mps, True, "mps"
    elif time_slicing is not None:
        resources, fail_default, strategy = time_slicing, False, "time-slicing"
    else:
        return Sharing()
    entries, fail = resources
    if not any(r.replicas > 1 for r in entries):
        strategy = "none"
    return Sharing(strategy, entries, fail if fail is not None else fail_default)


def _replicated_block(raw: Any) -> tuple[tuple[Replicated, ...], bool | None]:
    """ReplicatedResources: keys read from a map, so exact case (docs/upstream-facts.md P1.8)."""
    block = raw if isinstance(raw, dict) else {}
    if raw is not None and not isinstance(raw, dict):
        raise f.DecodeError(f"json: cannot unmarshal {f.json_type(raw)} into Go value of type map")
    rename_all = f.typed(block.get("renameByDefault"), bool, "renameByDefault") or False
    fail = f.typed(block.get("failRequestsGreaterThanOne"), bool, "failRequestsGreaterThanOne")
    items = block.get("resources")
    if not items:
        raise f.DecodeError("no resources specified")
    if not isinstance(items, list):
        raise f.DecodeError(f"json: cannot unmarshal {f.json_type(items)} into Go value of type []")
    entries = tuple(_replicated(item, rename_all) for item in items)
    return entries, fail


def _replicated(item: Any, rename_all: bool) -> Replicated:
    if not isinstance(item, dict):
        raise f.DecodeError(f"json: cannot unmarshal {f.json_type(item)} into Go value of type map")
    if "name" not in item:
        raise f.DecodeError("no resource name specified")
    name = resource_name(item["name"])
    if item.get("rename") is not None:
        resource_name(item["rename"])  # validated, then dropped (docs/upstream-facts.md P1.5)
    if item.get("devices") is not None:
        _check_devices(item["devices"])
    if "replicas" not in item:
        raise f.DecodeError("no replicas specified")
    replicas = item["replicas"]
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        raise f.DecodeError(
            f"json: cannot unmarshal {f.json_type(replicas)} into Go value of type int"
        )
    if replicas < 2:
        raise f.DecodeError("number of replicas must be >= 2")
    return Replicated(name, replicas, f"{name}.shared" if rename_all else "")


def resource_name(raw: Any) -> str:
    """ResourceName: bare names get nvidia.com/; anything else must then be valid
    (docs/upstream-facts.md P1.5)."""
    if not isinstance(raw, str):
        raise f.DecodeError(
            f"json: cannot unmarshal {f.json_type(raw)} into Go value of type v1.ResourceName"
        )
    name = raw if raw.startswith("nvidia.com/") else f"nvidia.com/{raw}"
    if len(name) > 63:
        raise f.DecodeError(f"fully-qualified resource name must be 63 characters or less: {name}")
    if not _SUBDOMAIN.fullmatch(name.removeprefix("nvidia.com/")):
        raise f.DecodeError(f"incorrect format for resource name '{name}': [{_SUBDOMAIN_MSG}]")
    return name


def _check_devices(devices: Any) -> None:
    if isinstance(devices, str):
        if devices != "all":
            raise f.DecodeError(
                f"devices set as '{devices}' but the only valid string input is 'all'"
            )
    elif isinstance(devices, int) and not isinstance(devices, bool):
        if devices <= 0:
            raise f.DecodeError(f"devices set as '{devices}' but a count of devices must be > 0")
    elif isinstance(devices, list):
        for device in devices:
            ok = (isinstance(device, int) and not isinstance(device, bool) and device >= 0) or (
                isinstance(device, str) and _DEVICE_FORMS.fullmatch(device) is not None
            )
            if not ok:
                raise f.DecodeError(f"unsupported type for device in devices list: {device!r}")
    else:
        raise f.DecodeError(f"unrecognized type for devices spec: {devices!r}")


def _check_resources_block(raw: Any) -> None:
    """Top-level `resources`: each entry needs pattern and name, then all is ignored
    (docs/upstream-facts.md P1.4)."""
    block = f.typed(raw, dict, "Config.resources") or {}
    for kind in ("gpus", "mig"):
        for entry in block.get(kind) or []:
            if not isinstance(entry, dict) or not entry.get("pattern"):
                raise f.DecodeError("resources must have a 'pattern' field set")
            if not entry.get("name"):
                raise f.DecodeError("resources must have a 'name' field set")


def _validate(config: PluginConfig, imex: Mapping[str, Any]) -> None:
    """The plugin's validateFlags (main.go L203-257): enums, IMEX, MPS requirements."""
    try:
        f.validate_enums(config.flags)
    except f.DecodeError as exc:
        raise ConfigError(f"unable to load config: unable to validate flags: {exc}") from None
    channels = imex.get("channelIDs") or []
    if channels not in ([], [0]):
        raise ConfigError(
            "unable to load config: unable to validate flags: invalid IMEX channel IDs: invalid "
            f"IMEX config: channelIDs must be [] or [0]; found {channels}"
        )
    if config.sharing.strategy == "mps":
        if config.mig_strategy == "mixed":
            raise ConfigError(
                "unable to load config: unable to validate flags: using --mig-strategy=mixed is "
                "not supported with MPS"
            )
        if not config.flags.get("mpsRoot"):
            raise ConfigError(
                "unable to load config: unable to validate flags: using MPS requires --mps-root "
                "to be specified"
            )
