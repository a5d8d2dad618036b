"""The `config` entries of claims, templates and DeviceClasses: shape, the requests they name,
NVIDIA's opaque parameters, and whether a config kind fits the devices it is aimed at.

The driver picks, for each allocated device, the last config that names the device's request,
or failing that the last config naming no request whose kind fits the device; so a config
that names a request of the wrong device type fails `NodePrepareResources` ("cannot apply
GpuConfig to device …"), while one that names no request is silently skipped where it does
not fit. Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from kubectl_gpu.dra import classes, objects, sharing
from kubectl_gpu.dra.catalogue import find
from kubectl_gpu.dra.objects import Request
from kubectl_gpu.findings import Finding, Path

_ENTRY_FIELDS = frozenset({"requests", "opaque"})
_CLASS_ENTRY_FIELDS = frozenset({"opaque"})
_OPAQUE_FIELDS = frozenset({"driver", "parameters"})


def check_claim(data: Mapping[str, Any], catalogue: Mapping[str, str]) -> list[Finding]:
    """Findings about a claim's or template's `config` list."""
    path = (*objects.devices_path(data), "config")
    entries = objects.at(data, path)
    if entries is None:
        return []
    if not isinstance(entries, list):
        return [find("dra.wrong-type", path, field="config", expected="a list", actual="not")]
    requests = objects.requests_of(data)
    found: list[Finding] = []
    for index, entry in enumerate(entries):
        here = (*path, index)
        if not isinstance(entry, Mapping):
            continue
        found += _fields(entry, here, _ENTRY_FIELDS)
        names = entry.get("requests")
        named = [n for n in names if isinstance(n, str)] if isinstance(names, list) else []
        found += _references(named, requests, (*here, "requests"))
        found += _opaque(entry, here, _devices(named, requests))
        found += _fit(entry, here, _targets(named, requests), catalogue)
    return found


def check_class(data: Mapping[str, Any]) -> list[Finding]:
    """Findings about a DeviceClass's `config` list (class configs name no requests)."""
    path = ("spec", "config")
    entries = objects.at(data, path)
    if not isinstance(entries, list):
        return []
    name = str(objects.at(data, ("metadata", "name")) or "")
    kind = classes.device_kind(data)
    target = [_Target(f"DeviceClass {name} selects them", name, kind)] if kind else []
    found: list[Finding] = []
    for index, entry in enumerate(entries):
        if isinstance(entry, Mapping):
            found += _fields(entry, (*path, index), _CLASS_ENTRY_FIELDS)
            found += _opaque(entry, (*path, index))
            found += _fit(entry, (*path, index), target, {})
    return found


def _references(named: list[str], requests: Sequence[Request], path: Path) -> list[Finding]:
    known = {n for r in requests for n in r.names()}
    listed = ", ".join(sorted(known)) or "(none)"
    return [
        find("dra.unknown-request", (*path, i), name=name, known=listed)
        for i, name in enumerate(named)
        if name not in known
    ]


@dataclasses.dataclass(frozen=True)
class _Target:
    """A device class a config reaches, and whether the config names it alone (`strict`: an
    exact request, or one firstAvailable alternative, named in `requests`)."""

    why: str
    cls: str
    kind: str | None = None
    strict: bool = False


def _targets(named: list[str], requests: Sequence[Request]) -> list[_Target]:
    """Each device class a config reaches: the named requests (or alternatives), or every
    request when it names none."""
    found: list[_Target] = []
    for request in requests:
        refs = [n for n in named if n.split("/", 1)[0] == request.name] if named else [request.name]
        for ref in refs:
            reached = request.classes_for(ref)
            strict = bool(named) and len(reached) == 1
            found += [
                _Target(f"request '{ref}' uses DeviceClass {c}", c, None, strict) for c in reached
            ]
    return found


def _devices(named: list[str], requests: Sequence[Request]) -> int | None:
    """How many devices a config applies to (the driver indexes them from 0), or None when
    that is not known before allocation."""
    reached = [r for r in requests if not named or r.names() & set(named)]
    counts = [r.count for r in reached]
    return None if not counts or None in counts else sum(c for c in counts if c is not None)


def _opaque(entry: Mapping[str, Any], path: Path, devices: int | None = None) -> list[Finding]:
    opaque = entry.get("opaque")
    if not isinstance(opaque, Mapping):
        return [_required((*path, "opaque"), "add opaque: {driver: gpu.nvidia.com, parameters: …}")]
    found = _fields(opaque, (*path, "opaque"), _OPAQUE_FIELDS)
    if not opaque.get("driver"):
        found.append(_required((*path, "opaque", "driver"), "add driver: gpu.nvidia.com"))
    if "parameters" not in opaque:
        found.append(_required((*path, "opaque", "parameters"), "add the GpuConfig parameters"))
    elif opaque.get("driver") == sharing.DRIVER:
        found += sharing.check(opaque["parameters"], (*path, "opaque", "parameters"), devices)
    return found


def _fit(
    entry: Mapping[str, Any],
    path: Path,
    targets: Sequence[_Target],
    catalogue: Mapping[str, str],
) -> list[Finding]:
    """A GpuConfig aimed at MIG devices, or a MigDeviceConfig at whole GPUs. A config that
    names one request fails NodePrepareResources on a device of the wrong type; one that names
    none (or a request with alternatives) is skipped where it does not fit, which is wrong
    only when it fits nothing it reaches."""
    parameters = objects.at(entry, ("opaque", "parameters"))
    if objects.at(entry, ("opaque", "driver")) != sharing.DRIVER:
        return []
    config = sharing.kind_of(parameters)
    wanted = sharing.device_for(config) if config else None
    if config is None or wanted is None:
        return []
    kinds = [(t, t.kind or catalogue.get(t.cls)) for t in targets]
    wrong: list[tuple[_Target, str | None]] = [
        (t, k) for t, k in kinds if t.strict and k is not None and k != wanted
    ]
    loose = [(t, k) for t, k in kinds if not t.strict]
    if loose and all(k is not None and k != wanted for _, k in loose):
        wrong.append(loose[0])
    return [_misfit(path, config, t, str(k)) for t, k in wrong]


def _misfit(path: Path, config: str, target: _Target, device: str) -> Finding:
    at_prepare = (
        f'; NodePrepareResources fails with "cannot apply {config} to device … of type '
        f"'{device}'\""
        if target.strict
        else "; the driver silently skips it for those devices, so it never takes effect"
    )
    return find(
        "dra.config-device-kind",
        (*path, "opaque", "parameters", "kind"),
        config=config,
        device=device,
        why=target.why,
        at_prepare=at_prepare,
        wanted=classes.CONFIG_FOR[device],
    )


def _fields(obj: Mapping[str, Any], path: Path, known: frozenset[str]) -> list[Finding]:
    return [
        find(
            "dra.unknown-field",
            (*path, key),
            at_key=True,
            field=key,
            where="",
            hint="known fields here: " + ", ".join(sorted(known)),
        )
        for key in obj
        if key not in known
    ]


def _required(path: Path, hint: str) -> Finding:
    return find("dra.required", path, field=str(path[-1]), detail="", hint=hint)
