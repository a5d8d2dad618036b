"""The core shape of a device claim, as the API server validates it: request names, exactly
one of `exactly`/`firstAvailable` (v1beta1: `deviceClassName`/`firstAvailable`), a device
class per request, `allocationMode` and `count`, CEL selectors present, list sizes.

Also catches the commonest migration slip, v1beta1 fields written flat on a v1 request,
which a strict decode (`kubectl apply`) rejects as an unknown field. Upstream wording where
it has some. Pure: standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kubectl_gpu.dra import objects
from kubectl_gpu.dra.catalogue import find
from kubectl_gpu.findings import Finding, Path

MAX_REQUESTS = 32
MAX_ALTERNATIVES = 8
MAX_SELECTORS = 32
MAX_CONFIGS = 32
_CLASS_FIELDS = frozenset({"selectors", "config", "extendedResourceName"})
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def check_claim(data: Mapping[str, Any]) -> list[Finding]:
    """Findings about a claim's or template's requests (configs are checked elsewhere)."""
    base = objects.devices_path(data)
    devices = objects.at(data, base)
    if not isinstance(devices, Mapping):
        return [_required(base, "a claim asks for devices", "add devices: {requests: [...]}")]
    requests = devices.get("requests")
    if not isinstance(requests, list) or not requests:
        return [_required((*base, "requests"), "", "add at least one request")]
    flat = objects.is_flat(objects.version_of(data))
    found = _too_many((*base, "requests"), requests, MAX_REQUESTS, "requests")
    found += _duplicates(_names(requests, (*base, "requests")))
    for index, request in enumerate(requests):
        path = (*base, "requests", index)
        if not isinstance(request, Mapping):
            found.append(_wrong_type(path, "a mapping", request))
            continue
        found += _request(request, path, flat)
    found += _too_many((*base, "config"), devices.get("config"), MAX_CONFIGS, "configs")
    return found


def check_class(data: Mapping[str, Any]) -> list[Finding]:
    """Findings about a DeviceClass's spec: its known fields and CEL selectors."""
    spec = data.get("spec")
    if spec is None:
        return []
    if not isinstance(spec, Mapping):
        return [_wrong_type(("spec",), "a mapping", spec)]
    found = _unknown(spec, ("spec",), _CLASS_FIELDS, True)
    found += _too_many(("spec", "config"), spec.get("config"), MAX_CONFIGS, "configs")
    return found + _selectors(spec.get("selectors"), ("spec", "selectors"))


def _request(request: Mapping[str, Any], path: Path, flat: bool) -> list[Finding]:
    found = _name(request.get("name"), (*path, "name"))
    alternatives = request.get("firstAvailable")
    exact_fields = sorted(k for k in request if k in objects.EXACT_FIELDS)
    if flat:
        has_exact = bool(exact_fields)
        found += _unknown(request, path, objects.EXACT_FIELDS | {"name", "firstAvailable"}, flat)
    else:
        has_exact = "exactly" in request
        found += _unknown(request, path, {"name", "exactly", "firstAvailable"}, flat)
    found += _one_kind(path, has_exact, alternatives is not None, flat)
    if alternatives is not None:
        found += _alternatives(alternatives, (*path, "firstAvailable"))
    elif has_exact:
        exact, exact_path = (request, path) if flat else (request["exactly"], (*path, "exactly"))
        found += _exact(exact, exact_path, flat)
    return found


def _one_kind(path: Path, exact: bool, first: bool, flat: bool) -> list[Finding]:
    if exact != first:
        return []
    one = "`deviceClassName`" if flat else "`exactly`"
    if exact:
        upstream = (
            f"exactly one of {one} or `firstAvailable` is required, but multiple fields are set"
        )
        hint = "keep either the exact request or the firstAvailable list of alternatives"
    else:
        upstream = f"exactly one of {one} or `firstAvailable` is required"
        hint = (
            "add deviceClassName: gpu.nvidia.com to the request"
            if flat
            else "add exactly: {deviceClassName: gpu.nvidia.com}"
        )
    return [find("dra.request-kind", path, upstream=upstream, hint=hint)]


def _exact(exact: Any, path: Path, flat: bool) -> list[Finding]:
    if not isinstance(exact, Mapping):
        return [_wrong_type(path, "a mapping", exact)]
    found = [] if flat else _unknown(exact, path, objects.EXACT_FIELDS, flat)
    return found + _device_fields(exact, path)


def _alternatives(alternatives: Any, path: Path) -> list[Finding]:
    if not isinstance(alternatives, list):
        return [_wrong_type(path, "a list", alternatives)]
    if not alternatives:
        return [_required(path, "", "list at least one alternative")]
    found = _too_many(path, alternatives, MAX_ALTERNATIVES, "firstAvailable alternatives")
    found += _duplicates(_names(alternatives, path))
    for index, alternative in enumerate(alternatives):
        here = (*path, index)
        if not isinstance(alternative, Mapping):
            found.append(_wrong_type(here, "a mapping", alternative))
            continue
        found += _name(alternative.get("name"), (*here, "name"))
        found += _unknown(alternative, here, objects.SUBREQUEST_FIELDS, False)
        found += _device_fields(alternative, here)
    return found


def _device_fields(exact: Mapping[str, Any], path: Path) -> list[Finding]:
    """deviceClassName, selectors, allocationMode and count of one exact request."""
    found = []
    cls = exact.get("deviceClassName")
    if not cls:
        found.append(
            _required(
                (*path, "deviceClassName"),
                "",
                "name a DeviceClass: gpu.nvidia.com (whole GPUs) or mig.nvidia.com (MIG devices)",
            )
        )
    elif not isinstance(cls, str) or len(cls) > 253 or not _SUBDOMAIN.match(cls):
        found.append(find("dra.device-class-name", (*path, "deviceClassName"), name=cls))
    found += _selectors(exact.get("selectors"), (*path, "selectors"))
    return found + _count(exact, path)


def _count(exact: Mapping[str, Any], path: Path) -> list[Finding]:
    mode = exact.get("allocationMode", "ExactCount")
    count = exact.get("count")
    if mode not in ("ExactCount", "All"):
        return [find("dra.allocation-mode", (*path, "allocationMode"), mode=mode)]
    if count is None:
        return []  # defaulted to 1 for ExactCount
    if isinstance(count, bool) or not isinstance(count, int):
        return [_wrong_type((*path, "count"), "a whole number", count)]
    if mode == "All":
        upstream = "must not be specified when allocationMode is 'All'"
        hint = "remove count: All allocates every matching device"
        return [find("dra.count", (*path, "count"), count=count, upstream=upstream, hint=hint)]
    if count <= 0:
        upstream, hint = "must be greater than zero", "ask for 1 or more devices"
        return [find("dra.count", (*path, "count"), count=count, upstream=upstream, hint=hint)]
    return []


def _selectors(selectors: Any, path: Path) -> list[Finding]:
    if selectors is None:
        return []
    if not isinstance(selectors, list):
        return [_wrong_type(path, "a list", selectors)]
    found = _too_many(path, selectors, MAX_SELECTORS, "selectors")
    for index, selector in enumerate(selectors):
        expression = objects.at(selector, ("cel", "expression"))
        if not isinstance(expression, str) or not expression.strip():
            where = (*path, index, "cel") if isinstance(selector, Mapping) else (*path, index)
            found.append(find("dra.selector", where, upstream=f"{_dotted(where)}: Required value"))
    return found


def _name(name: Any, path: Path) -> list[Finding]:
    if name is None or name == "":
        return [_required(path, "", "name the request, e.g. name: gpu")]
    if not isinstance(name, str) or len(name) > 63 or not _LABEL.match(name):
        return [find("dra.request-name", path, name=name)]
    return []


def _names(items: list[Any], path: Path) -> list[tuple[Any, Path]]:
    return [
        (r.get("name"), (*path, i, "name")) for i, r in enumerate(items) if isinstance(r, Mapping)
    ]


def _duplicates(names: list[tuple[Any, Path]]) -> list[Finding]:
    first: dict[str, int] = {}
    found = []
    for name, path in names:
        if not isinstance(name, str) or not name:
            continue
        if name in first:
            found.append(find("dra.duplicate-request", path, name=name, first=first[name]))
        first.setdefault(name, int(path[-2]))
    return found


def _unknown(
    obj: Mapping[str, Any], path: Path, known: set[str] | frozenset[str], flat: bool
) -> list[Finding]:
    found = []
    for key in obj:
        if key in known:
            continue
        where, hint = "", "remove it or fix its spelling"
        if not flat and key in objects.EXACT_FIELDS and "exactly" in known:
            where = " (this is the v1beta1 shape)"
            hint = f"in resource.k8s.io/v1 and v1beta2, {key} belongs under exactly:"
        elif flat and key == "exactly":
            where = " (exactly: is the v1/v1beta2 shape)"
            hint = "use apiVersion: resource.k8s.io/v1, or move its fields onto the request"
        found.append(
            find(
                "dra.unknown-field",
                (*path, key),
                at_key=True,
                field=_dotted((*path, key)),
                where=where,
                hint=hint,
            )
        )
    return found


def _too_many(path: Path, items: Any, limit: int, what: str) -> list[Finding]:
    if isinstance(items, list) and len(items) > limit:
        return [find("dra.too-many", path, count=len(items), limit=limit, what=what)]
    return []


def _required(path: Path, detail: str, hint: str) -> Finding:
    detail = detail and f": {detail}"
    return find("dra.required", path, field=_dotted(path), detail=detail, hint=hint)


def _wrong_type(path: Path, expected: str, value: Any) -> Finding:
    actual = type(value).__name__.replace("str", "a string").replace("NoneType", "empty")
    return find("dra.wrong-type", path, field=_dotted(path), expected=expected, actual=actual)


def _dotted(path: Path) -> str:
    """A path as the API server names fields: spec.devices.requests[0].exactly."""
    text = ""
    for item in path:
        text += f"[{item}]" if isinstance(item, int) else (f".{item}" if text else str(item))
    return text
