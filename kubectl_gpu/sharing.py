"""Device-plugin sharing config (v1): the semantic rules, a typed model and the replica edit.

Owns what `schemas/device-plugin-config.v1.json` cannot say about NVIDIA's device-plugin/GFD
config file: replicas >= 2, resource-name normalisation and format, duplicate and no-op
resources, the MPS limits, the keys upstream parses and then ignores, and version caveats
(reference/sharing-config.md §1, §8). `check()` runs even on documents the schema rejected,
so it skips every value whose type is wrong (the schema pass reports those) and never raises.

Pure: no I/O, no clock, no third-party imports. It must not repeat a schema finding, and
it must not parse text (schema.py turns text into the plain dict checked here).
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from kubectl_gpu import errors
from kubectl_gpu.findings import Finding, Path, Severity

RESOURCE_PREFIX = "nvidia.com/"
MAX_RESOURCE_NAME_LENGTH = 63
SHARED_SUFFIX = ".shared"
DEFAULT_RESOURCE = "nvidia.com/gpu"
MIN_REPLICAS = 2
# Above this many time-slicing replicas, the lack of memory and fault isolation dominates.
TIME_SLICING_REPLICAS_WARNING = 16
MPS_MAX_REPLICAS = 48  # per GPU of compute capability 7.5 or later
MPS_MAX_REPLICAS_OLD_GPU = 16  # below 7.5 (upstream calls 7.5 "Volta", so a V100 gets 16)

Strategy = Literal["none", "time-slicing", "mps"]
SharingStrategy = Literal["time-slicing", "mps"]
DeviceRef = str | int
Devices = str | int | tuple[DeviceRef, ...]

_E, _W = Severity.ERROR, Severity.WARNING
_IGNORED = 'the device plugin (up to v0.20) validates {field}, then {instead}; it logs "{log}"'
_MPS_CAP = (
    "invalid MPS configuration: invalid device maximum allowed replicas exceeded: "
    "{replicas} > {cap}"
)

# Every rule check() applies: code -> (severity, message, hint), formatted with the finding's
# values. Messages quote upstream's own error strings where it has one.
RULES: dict[str, tuple[Severity, str, str]] = {
    "sharing.both-strategies": (
        _E,
        "both sharing.timeSlicing and sharing.mps are set: the device plugin raises no error, "
        "uses MPS and silently ignores timeSlicing",
        "keep only the strategy you want: timeSlicing or mps",
    ),
    "sharing.no-resources": (
        _E,
        "no resources specified: sharing.{block} needs at least one resource, otherwise the "
        "device plugin fails to start",
        "add resources: [{{name: nvidia.com/gpu, replicas: 4}}], or remove sharing.{block} to "
        "turn sharing off",
    ),
    "sharing.replicas-too-low": (
        _E,
        "number of replicas must be >= 2",
        "use 2 or more replicas per GPU; to turn sharing off, remove the sharing block "
        "(replicas: 1 is rejected)",
    ),
    "sharing.resource-name-prefix": (
        _E,
        "resource name '{name}' has a prefix other than nvidia.com/: the device plugin reads it "
        "as '{full}' and fails with \"{upstream}\"",
        "use a name under nvidia.com/, e.g. nvidia.com/gpu (a bare 'gpu' means the same)",
    ),
    "sharing.resource-name-too-long": (
        _E,
        "{upstream}",
        "shorten the name: with its nvidia.com/ prefix it may have at most 63 characters",
    ),
    "sharing.resource-name-format": (
        _E,
        "{upstream}",
        "use lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, "
        "e.g. nvidia.com/gpu",
    ),
    "sharing.duplicate-resource": (
        _E,
        "{name} is listed twice (first as entry {first}): the device plugin raises no error and "
        "the replica count it uses is undefined",
        "keep a single entry per resource",
    ),
    "sharing.resource-not-advertised": (
        _W,
        "no device is advertised as {name} under migStrategy {mig}, so this entry shares nothing: "
        "the device plugin silently skips it (sharing.{block} can share {shareable} here)",
        "{fix}",
    ),
    "sharing.bad-devices": (
        _E,
        '{problem}: the device plugin fails with "{upstream}"',
        "use devices: all (the device plugin ignores any other value anyway), or list GPU "
        "indices (0), MIG indices (0:1) or UUIDs (GPU-…, MIG-…)",
    ),
    "sharing.devices-ignored": (
        _W,
        _IGNORED,
        "remove devices; to share only some nodes' GPUs, give those nodes another config through "
        "the nvidia.com/device-plugin.config label",
    ),
    "sharing.rename-ignored": (
        _W,
        _IGNORED,
        "remove rename; renameByDefault: true advertises <name>.shared instead",
    ),
    "sharing.many-replicas": (
        _W,
        "{replicas} time-slicing replicas per GPU: time-slicing gives no memory or fault "
        "isolation, so any one of these pods can use up the GPU's memory or crash the others",
        "use at most 16 replicas, or MPS (memory limited per client) or MIG (isolated "
        "instances) when pods must not disturb each other",
    ),
    "sharing.mps-too-many-replicas": (
        _E,
        'MPS allows at most 48 replicas per GPU: the MPS control daemon crash-loops with "'
        + _MPS_CAP
        + '" while the device plugin keeps advertising the replicas',
        "use at most 48 replicas (16 on GPUs below compute capability 7.5)",
    ),
    "sharing.mps-replicas-old-gpus": (
        _W,
        "{replicas} MPS replicas work only on GPUs of compute capability 7.5 or later: on older "
        'GPUs (V100, P100, ...) the MPS control daemon fails with "' + _MPS_CAP + '"',
        "use at most 16 replicas on nodes with older GPUs (node labels "
        "nvidia.com/gpu.compute.major/minor)",
    ),
    "sharing.mps-root-missing": (
        _W,
        "MPS needs a root directory and flags.mpsRoot is not set: the device plugin fails with "
        '"using MPS requires --mps-root to be specified" unless MPS_ROOT is set in its '
        "environment, as the NVIDIA Helm chart and the GPU Operator do (/run/nvidia/mps)",
        "add flags.mpsRoot: /run/nvidia/mps when the plugin runs without the Helm chart or the "
        "GPU Operator",
    ),
    "sharing.mps-with-mixed-mig": (
        _E,
        "using --mig-strategy=mixed is not supported with MPS",
        "use migStrategy: none with MPS (it shares full GPUs only), or time-slicing to share "
        "MIG devices",
    ),
    "sharing.mps-fail-requests-version": (
        _W,
        "failRequestsGreaterThanOne: false is honoured under MPS only from device plugin v0.20; "
        "earlier versions force it to true and reject pods that request more than one replica",
        "run device plugin v0.20 or later on these nodes, or request one replica per container",
    ),
    "sharing.allocation-policy-version": (
        _W,
        "sharedDevicesAllocationPolicy exists only from device plugin v0.20; earlier versions "
        "silently ignore it",
        "make sure these nodes run device plugin v0.20 or later",
    ),
    "sharing.device-list-comma": (
        _E,
        "deviceListStrategy '{value}' is one string, not a list: the device plugin fails with "
        '"invalid --device-list-strategy option: invalid strategy: {value}"',
        "write a YAML list: deviceListStrategy: [{names}]",
    ),
    "sharing.sleep-interval-nanoseconds": (
        _W,
        "GFD reads a bare number as nanoseconds: sleepInterval: {value} is {value}ns, not "
        "{value}s, so GFD relabels the node almost continuously",
        "write a duration with a unit, e.g. sleepInterval: {value}s",
    ),
    "sharing.sleep-interval-version": (
        _W,
        "sleepInterval: infinite is understood only from GFD v0.19; earlier versions fail with "
        '"time: invalid duration \\"infinite\\""',
        "make sure these nodes run GFD v0.19 or later, or use a long interval such as 24h",
    ),
    "sharing.imex-channel-ids": (
        _E,
        "invalid IMEX channel IDs: invalid IMEX config: channelIDs must be [] or [0]; found {ids}",
        "use channelIDs: [0], or [] for no IMEX channel",
    ),
    "sharing.resources-ignored": (
        _W,
        _IGNORED,
        "remove the resources block; to advertise shared GPUs as <name>.shared use "
        "renameByDefault: true in the sharing block",
    ),
}

_BLOCKS: dict[str, SharingStrategy] = {"timeSlicing": "time-slicing", "mps": "mps"}
_MIG_STRATEGIES = ("none", "single", "mixed")
_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1123_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_MIG_RESOURCE = re.compile(r"nvidia\.com/mig-[0-9]+g\.[0-9]+gb(\.[a-z0-9]+)*")
_UUID_DASHED = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# the four spellings Go's uuid.Parse accepts
_UUID = re.compile(
    rf"{_UUID_DASHED}|\{{{_UUID_DASHED}\}}|(?i:urn:uuid:){_UUID_DASHED}|[0-9a-fA-F]{{32}}"
)
_UINT = re.compile(r"[0-9]+")
_UINT_MAX = 2**64 - 1


def _find(code: str, path: Path, *, at_key: bool = False, **values: object) -> Finding:
    severity, message, hint = RULES[code]
    text, fix = message.format(**values), hint.format(**values)
    return Finding(severity, code, path, text, fix, at_key=at_key)


# --------------------------------------------------------------------------- resource names


def normalise_resource_name(name: str) -> str:
    """The fully-qualified name the device plugin uses: a bare `gpu` becomes `nvidia.com/gpu`.

    Like upstream, any name not starting with `nvidia.com/` gets the prefix, so a foreign
    prefix such as `example.com/gpu` becomes the invalid `nvidia.com/example.com/gpu`.
    """
    return name if name.startswith(RESOURCE_PREFIX) else RESOURCE_PREFIX + name


def _upstream_name_error(name: str) -> str | None:
    """The device plugin's error for a resource name, or None when it accepts the name."""
    full = normalise_resource_name(name)
    if len(full) > MAX_RESOURCE_NAME_LENGTH:
        limit = MAX_RESOURCE_NAME_LENGTH
        return f"fully-qualified resource name must be {limit} characters or less: {full}"
    if not _DNS1123_SUBDOMAIN.fullmatch(full[len(RESOURCE_PREFIX) :]):
        return f"incorrect format for resource name '{full}': [{_DNS1123_MESSAGE}]"
    return None


def _check_name(name: object, path: Path) -> Iterator[Finding]:
    if not isinstance(name, str):
        return  # missing or not a string: the schema reports it
    upstream = _upstream_name_error(name)
    full = normalise_resource_name(name)
    if upstream is None:
        return
    if "/" in name and not name.startswith(RESOURCE_PREFIX):
        yield _find("sharing.resource-name-prefix", path, name=name, full=full, upstream=upstream)
    elif len(full) > MAX_RESOURCE_NAME_LENGTH:
        yield _find("sharing.resource-name-too-long", path, upstream=upstream)
    else:
        yield _find("sharing.resource-name-format", path, upstream=upstream)


def _valid_name(name: object) -> str | None:
    """The normalised name when upstream accepts it, else None."""
    if isinstance(name, str) and _upstream_name_error(name) is None:
        return normalise_resource_name(name)
    return None


# --------------------------------------------------------------------------- small readers


def _mapping(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _whole_number(value: object) -> int | None:
    """An int as upstream's JSON decoding sees it: 4 and 4.0 alike; never a boolean."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _flags(doc: Mapping[str, Any], *section: str) -> Mapping[str, Any]:
    """`flags` (or `flags.plugin`, `flags.gfd`) when it is a mapping, else empty."""
    found = _mapping(doc.get("flags")) or {}
    for key in section:
        found = _mapping(found.get(key)) or {}
    return found


# --------------------------------------------------------------------------- check()


@dataclasses.dataclass(frozen=True)
class _Block:
    """One sharing block being checked, with what its rules need to know."""

    key: str  # timeSlicing | mps
    body: Mapping[str, Any]
    in_effect: bool  # False for timeSlicing when mps is present: upstream drops it
    mig_strategy: str | None  # None when the file's migStrategy is invalid

    @property
    def path(self) -> Path:
        return ("sharing", self.key)


def check(doc: Mapping[str, Any] | None) -> list[Finding]:
    """Every rule about one device-plugin config that its schema cannot express.

    `doc` is the plain dict of one config (None for an empty document). Never raises.
    """
    if not isinstance(doc, Mapping):
        return []  # an empty document is the default config; anything else is a schema error
    found: list[Finding] = []
    found.extend(_check_sharing(doc))
    found.extend(_check_plugin_flags(_flags(doc, "plugin")))
    found.extend(_check_sleep_interval(_flags(doc, "gfd").get("sleepInterval")))
    found.extend(_check_imex(_mapping(doc.get("imex")) or {}))
    found.extend(_check_custom_resources(_mapping(doc.get("resources")) or {}))
    return found


def _check_sharing(doc: Mapping[str, Any]) -> Iterator[Finding]:
    sharing = _mapping(doc.get("sharing")) or {}
    mps = _mapping(sharing.get("mps"))
    if mps is not None and _mapping(sharing.get("timeSlicing")) is not None:
        yield _find("sharing.both-strategies", ("sharing", "timeSlicing"), at_key=True)
    mig = _flags(doc).get("migStrategy", "none")
    for key in _BLOCKS:
        body = _mapping(sharing.get(key))
        if body is not None:
            in_effect = key == "mps" or mps is None
            yield from _check_block(
                _Block(key, body, in_effect, mig if mig in _MIG_STRATEGIES else None)
            )
    if mps is not None:
        yield from _check_mps(_flags(doc), mps)


def _check_block(block: _Block) -> Iterator[Finding]:
    resources = block.body.get("resources")
    if resources is None:
        yield _find("sharing.no-resources", block.path, at_key=True, block=block.key)
    elif resources == []:
        yield _find("sharing.no-resources", (*block.path, "resources"), block=block.key)
    elif isinstance(resources, list):
        seen: dict[str, int] = {}
        for index, entry in enumerate(resources):
            if isinstance(entry, Mapping):
                path = (*block.path, "resources", index)
                yield from _check_entry(block, entry, path)
                yield from _check_duplicate(_valid_name(entry.get("name")), path, seen)


def _check_entry(block: _Block, entry: Mapping[str, Any], path: Path) -> Iterator[Finding]:
    yield from _check_name(entry.get("name"), (*path, "name"))
    yield from _check_name(entry.get("rename"), (*path, "rename"))
    yield from _check_replicas(block, _whole_number(entry.get("replicas")), (*path, "replicas"))
    devices = entry.get("devices", "all")
    bad_devices = _devices_error(devices, (*path, "devices"))
    if bad_devices is not None:
        yield bad_devices
    if block.in_effect:
        well_formed = isinstance(devices, str | list) or _whole_number(devices) is not None
        if bad_devices is None and well_formed and devices != "all":
            yield _ignored("sharing.devices-ignored", (*path, "devices"), block.key)
        if _rename_is_custom(entry, rename_by_default=block.body.get("renameByDefault") is True):
            yield _ignored("sharing.rename-ignored", (*path, "rename"), block.key)
        yield from _check_advertised(block, _valid_name(entry.get("name")), (*path, "name"))


def _check_duplicate(name: str | None, path: Path, seen: dict[str, int]) -> Iterator[Finding]:
    index = path[-1]
    if name is None or not isinstance(index, int):
        return
    if name in seen:
        yield _find("sharing.duplicate-resource", (*path, "name"), name=name, first=seen[name])
    else:
        seen[name] = index


def _check_replicas(block: _Block, replicas: int | None, path: Path) -> Iterator[Finding]:
    if replicas is None:
        return  # missing or not an integer: the schema reports it
    if replicas < MIN_REPLICAS:
        yield _find("sharing.replicas-too-low", path)
    elif block.key == "mps" and replicas > MPS_MAX_REPLICAS:
        yield _find("sharing.mps-too-many-replicas", path, replicas=replicas, cap=MPS_MAX_REPLICAS)
    elif block.key == "mps" and replicas > MPS_MAX_REPLICAS_OLD_GPU:
        cap = MPS_MAX_REPLICAS_OLD_GPU
        yield _find("sharing.mps-replicas-old-gpus", path, replicas=replicas, cap=cap)
    elif block.key == "timeSlicing" and block.in_effect:
        if replicas > TIME_SLICING_REPLICAS_WARNING:
            yield _find("sharing.many-replicas", path, replicas=replicas)


def _check_advertised(block: _Block, name: str | None, path: Path) -> Iterator[Finding]:
    """Warn about names no device has under the migStrategy: upstream skips them silently."""
    if block.mig_strategy is None or name is None or name == DEFAULT_RESOURCE:
        return
    mixed = block.mig_strategy == "mixed"
    if block.key == "mps":
        shareable, fix = "only nvidia.com/gpu (full GPUs)", "share nvidia.com/gpu with MPS"
    elif mixed and _MIG_RESOURCE.fullmatch(name):
        return
    elif mixed:
        shareable = "nvidia.com/gpu and nvidia.com/mig-<profile>"
        fix = "share nvidia.com/gpu or a MIG profile such as nvidia.com/mig-1g.10gb"
    else:
        shareable = "only nvidia.com/gpu"
        fix = "share nvidia.com/gpu, or set flags.migStrategy: mixed to time-slice MIG devices"
    yield _find(
        "sharing.resource-not-advertised",
        path,
        name=name,
        mig=block.mig_strategy,
        block=block.key,
        shareable=shareable,
        fix=fix,
    )


def _ignored(code: str, path: Path, block: str) -> Finding:
    field = path[-1]
    instead = "shares all GPUs anyway" if field == "devices" else "drops it"
    verb = "Customizing" if field == "devices" else "Setting"
    log = f"{verb} the '{field}' field in sharing.{block}.resources is not yet supported in the"
    return _find(code, path, field=field, instead=instead, log=log + " config. Ignoring...")


def _rename_is_custom(entry: Mapping[str, Any], *, rename_by_default: bool) -> bool:
    """A rename upstream drops: any, except `<name>.shared` under renameByDefault."""
    rename, name = _valid_name(entry.get("rename")), _valid_name(entry.get("name"))
    if rename is None:
        return False
    return not rename_by_default or name is None or rename != name + SHARED_SUFFIX


# --------------------------------------------------------------------------- devices


def _devices_error(devices: object, path: Path) -> Finding | None:
    """Upstream's parse error for `devices` (all, a count > 0, or a list of device refs)."""
    if isinstance(devices, list):
        return _device_list_error(devices, path)
    if isinstance(devices, str) and devices != "all":
        upstream = f"devices set as '{devices}' but the only valid string input is 'all'"
        problem = f"'{devices}' is not a devices value (all, a count or a list)"
        return _find("sharing.bad-devices", path, problem=problem, upstream=upstream)
    count = _whole_number(devices)
    if count is not None and count <= 0:
        upstream = f"devices set as '{count}' but a count of devices must be > 0"
        problem = f"a count of devices must be at least 1, not {count}"
        return _find("sharing.bad-devices", path, problem=problem, upstream=upstream)
    return None  # "all", a positive count, or a type the schema reports


def _device_list_error(devices: list[Any], path: Path) -> Finding | None:
    for index, item in enumerate(devices):
        number = _whole_number(item)
        if number is None and not isinstance(item, str):
            continue  # neither an integer nor a string: the schema reports its type
        if (number is not None and 0 <= number <= _UINT_MAX) or (
            isinstance(item, str) and _is_device_ref(item)
        ):
            continue
        # upstream prints the item only when it was a string, hence the empty value for -1
        shown = item if isinstance(item, str) else ""
        upstream = f"unsupported type for device in devices list: {shown}, string"
        problem = f"{item!r} is not a GPU index, MIG index (0:1) or GPU/MIG UUID"
        return _find("sharing.bad-devices", (*path, index), problem=problem, upstream=upstream)
    return None


def _is_device_ref(item: str) -> bool:
    """GPU index, MIG index `i:j`, `GPU-<uuid>`, `MIG-<uuid>` or `MIG-GPU-<uuid>/<gi>/<ci>`."""
    parts = item.split(":", 1)
    if all(_is_uint(part) for part in parts):
        return True
    if item.startswith("GPU-"):
        return _UUID.fullmatch(item[4:]) is not None
    if not item.startswith("MIG-"):
        return False
    if _UUID.fullmatch(item[4:]):
        return True
    gpu, *ids = item[4:].split("/", 2)
    is_gpu = gpu.startswith("GPU-") and _UUID.fullmatch(gpu[4:]) is not None
    return is_gpu and len(ids) == 2 and all(_is_uint(i) for i in ids)


def _is_uint(text: str) -> bool:
    return _UINT.fullmatch(text) is not None and int(text) <= _UINT_MAX


# --------------------------------------------------------------------------- MPS, flags, imex


def _check_mps(flags: Mapping[str, Any], mps: Mapping[str, Any]) -> Iterator[Finding]:
    if flags.get("mpsRoot") in (None, ""):
        yield _find("sharing.mps-root-missing", ("sharing", "mps"), at_key=True)
    if flags.get("migStrategy") == "mixed":
        yield _find("sharing.mps-with-mixed-mig", ("flags", "migStrategy"))
    if mps.get("failRequestsGreaterThanOne") is False:
        path = ("sharing", "mps", "failRequestsGreaterThanOne")
        yield _find("sharing.mps-fail-requests-version", path)


def _check_plugin_flags(plugin: Mapping[str, Any]) -> Iterator[Finding]:
    path = ("flags", "plugin")
    if plugin.get("sharedDevicesAllocationPolicy") in ("distributed", "packed"):
        yield _find("sharing.allocation-policy-version", (*path, "sharedDevicesAllocationPolicy"))
    value = plugin.get("deviceListStrategy")
    if isinstance(value, str) and "," in value:
        names = [part.strip() for part in value.split(",")]
        if all(name in _LIST_STRATEGIES for name in names):  # otherwise the schema reports it
            where = (*path, "deviceListStrategy")
            yield _find("sharing.device-list-comma", where, value=value, names=", ".join(names))


def _check_sleep_interval(value: object) -> Iterator[Finding]:
    path = ("flags", "gfd", "sleepInterval")
    if value == "infinite":
        yield _find("sharing.sleep-interval-version", path)
    elif isinstance(value, int | float) and not isinstance(value, bool) and value < 1e9:
        yield _find("sharing.sleep-interval-nanoseconds", path, value=value)


def _check_imex(imex: Mapping[str, Any]) -> Iterator[Finding]:
    ids = imex.get("channelIDs")
    if not isinstance(ids, list):
        return
    numbers = [_whole_number(i) for i in ids]
    if None in numbers or numbers in ([], [0]):
        return  # valid, or an item of the wrong type, which the schema reports
    shown = "[" + " ".join(str(n) for n in numbers) + "]"  # Go's %v of a slice
    yield _find("sharing.imex-channel-ids", ("imex", "channelIDs"), ids=shown)


def _check_custom_resources(resources: Mapping[str, Any]) -> Iterator[Finding]:
    in_use = False
    for group in ("gpus", "mig"):
        entries = resources.get(group)
        if isinstance(entries, list):
            in_use = in_use or bool(entries)
            for index, entry in enumerate(entries):
                name = entry.get("name") if isinstance(entry, Mapping) else None
                yield from _check_name(name, ("resources", group, index, "name"))
    if in_use:
        log = "Customizing the 'resources' field is not yet supported in the config. Ignoring..."
        instead = "advertises its default resource names anyway"
        yield _find(
            "sharing.resources-ignored",
            ("resources",),
            at_key=True,
            field="the top-level resources block",
            instead=instead,
            log=log,
        )


# --------------------------------------------------------------------------- typed model


@dataclasses.dataclass(frozen=True)
class SharedResource:
    """One shared resource: its normalised name and the replicas each GPU gets."""

    name: str
    replicas: int
    rename: str | None = None  # validated, then dropped by the plugin (up to v0.20)
    devices: Devices = "all"  # validated, then forced to "all" by the plugin (up to v0.20)

    def advertised_name(self, rename_by_default: bool) -> str:
        """The name the plugin really advertises: custom renames are dropped upstream."""
        return self.name + SHARED_SUFFIX if rename_by_default else self.name


@dataclasses.dataclass(frozen=True)
class Sharing:
    """The sharing block in effect: MPS whenever `sharing.mps` exists, else time-slicing."""

    strategy: SharingStrategy
    rename_by_default: bool
    fail_requests_greater_than_one: bool | None  # None: not set in the file
    resources: tuple[SharedResource, ...]

    @property
    def rejects_requests_greater_than_one(self) -> bool:
        """Whether a pod asking for more than one replica fails (unset: true under MPS only)."""
        if self.fail_requests_greater_than_one is None:
            return self.strategy == "mps"
        return self.fail_requests_greater_than_one


@dataclasses.dataclass(frozen=True)
class DevicePluginConfig:
    """A device-plugin config reduced to what sharing needs; `raw` keeps the whole document."""

    mig_strategy: str
    sharing: Sharing | None
    raw: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any] | None) -> DevicePluginConfig:
        """Build the model from a document the schema and `check()` found no error in."""
        raw = copy.deepcopy(dict(doc or {}))
        sharing = _mapping(raw.get("sharing")) or {}
        key = "mps" if "mps" in sharing else "timeSlicing" if "timeSlicing" in sharing else None
        block = None if key is None else _sharing_from_dict(_BLOCKS[key], sharing[key])
        return cls(str(_flags(raw).get("migStrategy", "none")), block, raw)

    @property
    def strategy(self) -> Strategy:
        """The strategy upstream reports: none unless some resource has replicas > 1."""
        if self.sharing is None or not any(r.replicas > 1 for r in self.sharing.resources):
            return "none"
        return self.sharing.strategy


def _sharing_from_dict(strategy: SharingStrategy, block: object) -> Sharing:
    body = _require_mapping(block, f"the {strategy} block")
    fail = body.get("failRequestsGreaterThanOne")
    entries = body.get("resources")
    if not isinstance(entries, list) or not entries:
        raise errors.ConfigError(f"the {strategy} block has no resources; validate it first")
    return Sharing(
        strategy=strategy,
        rename_by_default=body.get("renameByDefault") is True,
        fail_requests_greater_than_one=fail if isinstance(fail, bool) else None,
        resources=tuple(_resource_from_dict(entry) for entry in entries),
    )


def _resource_from_dict(entry: object) -> SharedResource:
    body = _require_mapping(entry, "a shared resource")
    name, rename = body.get("name"), body.get("rename")
    replicas = _whole_number(body.get("replicas"))
    if not isinstance(name, str) or replicas is None:
        raise errors.ConfigError("a shared resource needs a name and whole-number replicas")
    devices = body.get("devices", "all")
    return SharedResource(
        name=normalise_resource_name(name),
        replicas=replicas,
        rename=normalise_resource_name(rename) if isinstance(rename, str) else None,
        devices=tuple(devices) if isinstance(devices, list) else devices,
    )


def _require_mapping(value: object, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise errors.ConfigError(f"{what} is not a mapping; validate the config first")
    return value


# --------------------------------------------------------------------------- edits


def with_replicas(  # noqa: PLR0913 - the share command's options, all keyword-only
    doc: Mapping[str, Any] | None,
    replicas: int,
    *,
    resource: str = DEFAULT_RESOURCE,
    mps: bool = False,
    rename_by_default: bool | None = None,
    fail_requests_greater_than_one: bool | None = None,
) -> dict[str, Any]:
    """A copy of `doc` sharing `resource` with `replicas` per GPU; `doc` is left untouched.

    Every other key is kept, and `version: v1` is added when absent. The other strategy's
    block is removed (upstream silently ignores time-slicing next to MPS); when switching
    strategy, its resources and renameByDefault carry over. `None` for the two booleans keeps
    what the block has. Raises UsageError for replicas < 2 or an invalid resource name.
    """
    _require_edit_arguments(replicas, resource)
    edited: dict[str, Any] = copy.deepcopy(dict(doc or {}))
    edited.setdefault("version", "v1")
    sharing = _mapping(edited.get("sharing")) or {}
    key, other = ("mps", "timeSlicing") if mps else ("timeSlicing", "mps")
    block = _start_block(sharing.get(key), sharing.get(other))
    if rename_by_default is not None:
        block["renameByDefault"] = rename_by_default
    if fail_requests_greater_than_one is not None:
        block["failRequestsGreaterThanOne"] = fail_requests_greater_than_one
    block["resources"] = _set_replicas(block.get("resources"), resource, replicas)
    kept = {k: v for k, v in sharing.items() if k not in (key, other)}
    edited["sharing"] = {**kept, key: block}
    return edited


def without_sharing(doc: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of `doc` with sharing turned off: the block removed (replicas: 1 is invalid)."""
    edited = copy.deepcopy(dict(doc or {}))
    edited.pop("sharing", None)
    return edited


def _require_edit_arguments(replicas: int, resource: str) -> None:
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < MIN_REPLICAS:
        raise errors.UsageError(
            f"replicas must be a whole number >= {MIN_REPLICAS}, not {replicas!r}",
            hint="to turn sharing off, remove the sharing block instead",
        )
    foreign = "/" in resource and not resource.startswith(RESOURCE_PREFIX)
    problem = (
        "only the nvidia.com/ prefix is allowed" if foreign else _upstream_name_error(resource)
    )
    if problem is not None:
        raise errors.UsageError(
            f"invalid resource name '{resource}': {problem}",
            hint="use a name such as nvidia.com/gpu or nvidia.com/mig-1g.10gb",
        )


def _start_block(current: object, other: object) -> dict[str, Any]:
    """The block to edit: the existing one, else the other strategy's, carried over."""
    if isinstance(current, Mapping):
        return dict(current)
    if isinstance(other, Mapping):
        # failRequestsGreaterThanOne's default differs between the strategies: do not carry it
        return {k: v for k, v in other.items() if k != "failRequestsGreaterThanOne"}
    return {}


def _set_replicas(entries: object, resource: str, replicas: int) -> list[Any]:
    wanted = normalise_resource_name(resource)
    result = list(entries) if isinstance(entries, list) else []
    for index, entry in enumerate(result):
        if isinstance(entry, Mapping) and _valid_name(entry.get("name")) == wanted:
            result[index] = {**entry, "replicas": replicas}
            return result
    result.append({"name": resource, "replicas": replicas})
    return result
