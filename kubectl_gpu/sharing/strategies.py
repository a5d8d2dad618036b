"""The sharing blocks of a device-plugin config, `sharing.timeSlicing` and `sharing.mps`.

Owns which block is in effect (upstream uses MPS whenever `sharing.mps` exists and drops
timeSlicing silently), the replica limits, and the rules about each block's resources:
replicas, duplicates, names no device is advertised as, the `devices` and `rename` fields
upstream validates and then ignores, and what MPS needs from `flags`
(docs/upstream-facts.md P1, P8). Must not check the config's other sections (flags.plugin,
flags.gfd, imex, the top-level resources block). Pure: standard library, kubectl_gpu.findings.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping
from typing import Any

from kubectl_gpu.findings import Finding, Path
from kubectl_gpu.sharing import catalogue, devices, document, model, names

MIN_REPLICAS = 2
# Above this many time-slicing replicas, the lack of memory and fault isolation dominates.
TIME_SLICING_REPLICAS_WARNING = 16
MPS_MAX_REPLICAS = 48  # per GPU of compute capability 7.5 or later
MPS_MAX_REPLICAS_OLD_GPU = 16  # below 7.5 (upstream calls 7.5 "Volta", so a V100 gets 16)

_MIG_STRATEGIES = ("none", "single", "mixed")
_MIG_RESOURCE = re.compile(r"nvidia\.com/mig-[0-9]+g\.[0-9]+gb(\.[a-z0-9]+)*")


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


def check(doc: Mapping[str, Any]) -> Iterator[Finding]:
    """Every finding about the document's sharing blocks, timeSlicing's before mps's."""
    sharing = document.mapping(doc.get("sharing")) or {}
    mps = document.mapping(sharing.get("mps"))
    if mps is not None and document.mapping(sharing.get("timeSlicing")) is not None:
        yield catalogue.find("sharing.both-strategies", ("sharing", "timeSlicing"), at_key=True)
    mig = document.flags(doc).get("migStrategy", "none")
    for key in model.BLOCKS:
        body = document.mapping(sharing.get(key))
        if body is not None:
            in_effect = key == "mps" or mps is None
            yield from _check_block(
                _Block(key, body, in_effect, mig if mig in _MIG_STRATEGIES else None)
            )
    if mps is not None:
        yield from _check_mps(document.flags(doc), mps)


def _check_block(block: _Block) -> Iterator[Finding]:
    resources = block.body.get("resources")
    if resources is None:
        yield catalogue.find("sharing.no-resources", block.path, at_key=True, block=block.key)
    elif resources == []:
        where = (*block.path, "resources")
        yield catalogue.find("sharing.no-resources", where, block=block.key)
    elif isinstance(resources, list):
        seen: dict[str, int] = {}
        for index, entry in enumerate(resources):
            if isinstance(entry, Mapping):
                path = (*block.path, "resources", index)
                yield from _check_entry(block, entry, path)
                yield from _check_duplicate(names.valid_name(entry.get("name")), path, seen)


def _check_entry(block: _Block, entry: Mapping[str, Any], path: Path) -> Iterator[Finding]:
    yield from names.check_name(entry.get("name"), (*path, "name"))
    yield from names.check_name(entry.get("rename"), (*path, "rename"))
    replicas = document.whole_number(entry.get("replicas"))
    yield from _check_replicas(block, replicas, (*path, "replicas"))
    value = entry.get("devices", "all")
    bad_devices = devices.parse_error(value, (*path, "devices"))
    if bad_devices is not None:
        yield bad_devices
    if block.in_effect:
        well_formed = isinstance(value, str | list) or document.whole_number(value) is not None
        if bad_devices is None and well_formed and value != "all":
            yield _ignored("sharing.devices-ignored", (*path, "devices"), block.key)
        if _rename_is_custom(entry, rename_by_default=block.body.get("renameByDefault") is True):
            yield _ignored("sharing.rename-ignored", (*path, "rename"), block.key)
        yield from _check_advertised(block, names.valid_name(entry.get("name")), (*path, "name"))


def _check_duplicate(name: str | None, path: Path, seen: dict[str, int]) -> Iterator[Finding]:
    index = path[-1]
    if name is None or not isinstance(index, int):
        return
    if name in seen:
        where = (*path, "name")
        yield catalogue.find("sharing.duplicate-resource", where, name=name, first=seen[name])
    else:
        seen[name] = index


def _check_replicas(block: _Block, replicas: int | None, path: Path) -> Iterator[Finding]:
    if replicas is None:
        return  # missing or not an integer: the schema reports it
    if replicas < MIN_REPLICAS:
        yield catalogue.find("sharing.replicas-too-low", path)
    elif block.key == "mps" and replicas > MPS_MAX_REPLICAS:
        cap = MPS_MAX_REPLICAS
        yield catalogue.find("sharing.mps-too-many-replicas", path, replicas=replicas, cap=cap)
    elif block.key == "mps" and replicas > MPS_MAX_REPLICAS_OLD_GPU:
        cap = MPS_MAX_REPLICAS_OLD_GPU
        yield catalogue.find("sharing.mps-replicas-old-gpus", path, replicas=replicas, cap=cap)
    elif block.key == "timeSlicing" and block.in_effect:
        if replicas > TIME_SLICING_REPLICAS_WARNING:
            yield catalogue.find("sharing.many-replicas", path, replicas=replicas)


def _check_advertised(block: _Block, name: str | None, path: Path) -> Iterator[Finding]:
    """Warn about names no device has under the migStrategy: upstream skips them silently."""
    if block.mig_strategy is None or name is None or name == names.DEFAULT_RESOURCE:
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
    yield catalogue.find(
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
    return catalogue.find(
        code, path, field=field, instead=instead, log=log + " config. Ignoring..."
    )


def _rename_is_custom(entry: Mapping[str, Any], *, rename_by_default: bool) -> bool:
    """A rename upstream drops: any, except `<name>.shared` under renameByDefault."""
    rename, name = names.valid_name(entry.get("rename")), names.valid_name(entry.get("name"))
    if rename is None:
        return False
    return not rename_by_default or name is None or rename != name + names.SHARED_SUFFIX


def _check_mps(flags: Mapping[str, Any], mps: Mapping[str, Any]) -> Iterator[Finding]:
    if flags.get("mpsRoot") in (None, ""):
        yield catalogue.find("sharing.mps-root-missing", ("sharing", "mps"), at_key=True)
    if flags.get("migStrategy") == "mixed":
        yield catalogue.find("sharing.mps-with-mixed-mig", ("flags", "migStrategy"))
    if mps.get("failRequestsGreaterThanOne") is False:
        path = ("sharing", "mps", "failRequestsGreaterThanOne")
        yield catalogue.find("sharing.mps-fail-requests-version", path)
