"""DRA objects as users write them: which `resource.k8s.io` kinds and versions exist, where a
kind keeps its device claim, and the requests a claim makes.

Owns the version differences of the core shape: in `resource.k8s.io/v1` and `v1beta2` a
request holds its device class under `exactly:` (or alternatives under `firstAvailable:`);
in `v1beta1` the same fields sit on the request itself. Must not judge (the checks do).
Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kubectl_gpu.findings import Path

GROUP = "resource.k8s.io"
VERSIONS = ("v1", "v1beta2", "v1beta1")
CLAIM, TEMPLATE, CLASS = "ResourceClaim", "ResourceClaimTemplate", "DeviceClass"
KINDS = (CLAIM, TEMPLATE, CLASS)

# Fields of one exact request (v1/v1beta2 `exactly`, or a v1beta1 request itself) and of
# a firstAvailable alternative, as the API server decodes them strictly.
EXACT_FIELDS = frozenset(
    {"deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations",
     "capacity"}
)  # fmt: skip
SUBREQUEST_FIELDS = EXACT_FIELDS - {"adminAccess"} | {"name"}


def is_dra(data: Any) -> bool:
    """True for a ResourceClaim, ResourceClaimTemplate or DeviceClass of any served version."""
    if not isinstance(data, Mapping):
        return False
    group, _, version = str(data.get("apiVersion", "")).rpartition("/")
    return group == GROUP and data.get("kind") in KINDS


def version_of(data: Mapping[str, Any]) -> str:
    """`v1`, `v1beta2` or `v1beta1` (anything else is read as v1, the GA shape)."""
    version = str(data.get("apiVersion", "")).rpartition("/")[2]
    return version if version in VERSIONS else "v1"


def is_flat(version: str) -> bool:
    """True where request fields sit on the request itself (v1beta1), not under `exactly`."""
    return version == "v1beta1"


def devices_path(data: Mapping[str, Any]) -> Path:
    """Where a claim or template keeps its `devices` block."""
    return ("spec", "spec", "devices") if data.get("kind") == TEMPLATE else ("spec", "devices")


def at(data: Any, path: Path) -> Any:
    """The value at `path`, or None when any part of it is missing."""
    for item in path:
        if isinstance(data, Mapping) and isinstance(item, str):
            data = data.get(item)
        elif isinstance(data, list) and isinstance(item, int) and 0 <= item < len(data):
            data = data[item]
        else:
            return None
    return data


@dataclasses.dataclass(frozen=True)
class Request:
    """One request of a claim: its name, where it is, and the device classes it may use
    (one for an exact request; one per alternative, in order, for firstAvailable)."""

    name: str
    path: Path
    classes: tuple[str, ...]
    alternatives: tuple[str, ...] = ()  # firstAvailable subrequest names, in order
    count: int | None = 1  # devices it allocates; None: not known before allocation (All)

    def names(self) -> set[str]:
        """The names a config's `requests` may use for it: `main` and `main/alternative`."""
        return {self.name} | {f"{self.name}/{a}" for a in self.alternatives}

    def classes_for(self, ref: str) -> tuple[str, ...]:
        """The classes a config naming `ref` (this request or one alternative) applies to."""
        if "/" not in ref:
            return self.classes
        wanted = ref.split("/", 1)[1]
        pairs = zip(self.alternatives, self.classes, strict=False)
        return tuple(cls for name, cls in pairs if name == wanted)


def requests_of(data: Mapping[str, Any]) -> list[Request]:
    """The well-formed enough requests of a claim or template (malformed ones are skipped:
    the shape checks report them)."""
    base = devices_path(data)
    flat = is_flat(version_of(data))
    found = []
    for index, request in enumerate(_list(at(data, (*base, "requests")))):
        if not isinstance(request, Mapping) or not isinstance(request.get("name"), str):
            continue
        path = (*base, "requests", index)
        alternatives = [a for a in _list(request.get("firstAvailable")) if isinstance(a, Mapping)]
        if alternatives:
            names = tuple(str(a.get("name", "")) for a in alternatives)
            classes = tuple(str(a.get("deviceClassName", "")) for a in alternatives)
            counts = [_count(a) for a in alternatives]
            most = None if None in counts else max(c for c in counts if c is not None)
            found.append(Request(request["name"], path, classes, names, most))
            continue
        exact = request if flat else request.get("exactly")
        cls = exact.get("deviceClassName") if isinstance(exact, Mapping) else None
        classes = (cls,) if isinstance(cls, str) else ()
        count = _count(exact) if isinstance(exact, Mapping) else None
        found.append(Request(request["name"], path, classes, count=count))
    return found


def _count(request: Mapping[str, Any]) -> int | None:
    """How many devices a request allocates: `count` (default 1), or None for All."""
    if request.get("allocationMode", "ExactCount") != "ExactCount":
        return None
    count = request.get("count", 1)
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def mapping_at(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """`obj[key]` when it is a mapping, else empty: API objects are read leniently."""
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def items_at(obj: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    """The mappings in the list `obj[key]` (anything else is skipped)."""
    value = obj.get(key)
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []
