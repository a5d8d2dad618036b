"""Which GPUs a mig-parted spec selects: its `devices` and `device-filter` fields.

Owns `ALL`, the device-filter grammar (`DeviceFilter`, `parse_device_filter`) and the rules
about selection a JSON Schema cannot express: filters mig-parted cannot use or reads
differently, empty and repeated device lists, and specs of one config that select the same
GPU (docs/upstream-facts.md M1). Like `spec.check`, the rules run on plain data even when its
structure is broken, skip what has the wrong shape and never raise. Must not look at
mig-enabled or mig-devices (spec.py does), nor read files. Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias

from kubectl_gpu import findings, scalars
from kubectl_gpu.findings import Finding, Path

ALL: Final = "all"
Devices: TypeAlias = Literal["all"] | tuple[int, ...]

_HEX_ID = r"0[xX][0-9A-Fa-f]{8}"
_DEVICE_FILTER = re.compile(rf"{_HEX_ID}(?::{_HEX_ID})?")


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
    """Parse `0x20B010DE` or `0x20B010DE:0x147E10DE` in any form mig-parted reads (see
    `_as_mig_parted_reads`); None when mig-parted cannot parse it (it then matches no GPU)."""
    read = _as_mig_parted_reads(text)
    if read is None:
        return None
    return DeviceFilter(read[0], read[1] if len(read) == 2 else None)


def whole(value: object) -> int | None:
    """A non-negative whole number as YAML may write it (7 or 7.0), else None.

    A GPU index here; spec.py reads profile counts with it too.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


# --- device-filter and devices --------------------------------------------------------------


def check_device_filter(path: Path, value: object) -> list[Finding]:
    """Findings about one spec's `device-filter`, a string or a list of strings."""
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
    """Each half as mig-parted reads it: Go's strconv.ParseUint(s, 0, 32), so `0x20B0_10DE`,
    `0o…`, `0b…`, decimal and a leading-zero octal all name the same IDs as the 0x form."""
    parts = text.split(":")
    if len(parts) > 2:
        return None
    values = [scalars.go_parse_uint(part, 32) for part in parts]
    if any(value is None for value in values):
        return None
    return tuple(v for v in values if v is not None)


def check_devices(path: Path, value: object) -> list[Finding]:
    """Findings about one spec's `devices` list: empty, or a GPU listed twice."""
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
        index = whole(item)
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


def check_overlaps(path: Path, specs: Sequence[Any]) -> list[Finding]:
    """A finding for each spec of one config that selects a GPU an earlier spec selects."""
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
    indices = [whole(d) for d in devices]
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
    parsed = (_as_mig_parted_reads(i) for i in items)
    usable = frozenset(":".join(f"0x{part:08X}" for part in ids) for ids in parsed if ids)
    if items and not usable:
        return None
    return usable
