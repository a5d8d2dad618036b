"""The typed model of a device-plugin config: what the plugin will really share.

Owns the frozen values (`DevicePluginConfig`, `Sharing`, `SharedResource`), the strategy
vocabulary, and `from_dict`, which builds them from a document the schema and `check()` found
no error in, keeping upstream's quirks (MPS wins over time-slicing; custom renames and devices
are dropped). Raises ConfigError for a document it cannot read. Must not check a document
(rules.py does) nor edit one (edits.py does). Pure: standard library, kubectl_gpu.errors.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

from kubectl_gpu import errors
from kubectl_gpu.sharing import document, names

Strategy = Literal["none", "time-slicing", "mps"]
SharingStrategy = Literal["time-slicing", "mps"]
DeviceRef = str | int
Devices = str | int | tuple[DeviceRef, ...]

# The sharing blocks by their key in the file, in the order the rules check them.
BLOCKS: dict[str, SharingStrategy] = {"timeSlicing": "time-slicing", "mps": "mps"}


@dataclasses.dataclass(frozen=True)
class SharedResource:
    """One shared resource: its normalised name and the replicas each GPU gets."""

    name: str
    replicas: int
    rename: str | None = None  # validated, then dropped by the plugin (up to v0.20)
    devices: Devices = "all"  # validated, then forced to "all" by the plugin (up to v0.20)

    def advertised_name(self, rename_by_default: bool) -> str:
        """The name the plugin really advertises: custom renames are dropped upstream."""
        return self.name + names.SHARED_SUFFIX if rename_by_default else self.name


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
        sharing = document.mapping(raw.get("sharing")) or {}
        key = "mps" if "mps" in sharing else "timeSlicing" if "timeSlicing" in sharing else None
        block = None if key is None else _sharing_from_dict(BLOCKS[key], sharing[key])
        return cls(str(document.flags(raw).get("migStrategy", "none")), block, raw)

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
    replicas = document.whole_number(body.get("replicas"))
    if not isinstance(name, str) or replicas is None:
        raise errors.ConfigError("a shared resource needs a name and whole-number replicas")
    devices = body.get("devices", "all")
    return SharedResource(
        name=names.normalise_resource_name(name),
        replicas=replicas,
        rename=names.normalise_resource_name(rename) if isinstance(rename, str) else None,
        devices=tuple(devices) if isinstance(devices, list) else devices,
    )


def _require_mapping(value: object, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise errors.ConfigError(f"{what} is not a mapping; validate the config first")
    return value
