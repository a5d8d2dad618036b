"""Reading a device-plugin config the way the device plugin reads it, before any rule runs.

The plugin decodes its config with Go's encoding/json (through sigs.k8s.io/yaml). Where a key
is a Go struct field (the top level, `flags` and everything in it, `sharing.timeSlicing`/`mps`,
`imex`, `resources.gpus`/`mig`) it matches the key case-insensitively and reads null as
"unset". Inside a sharing block and a resource entry it reads a map by hand: keys are
case-sensitive there, and a null is a value (an empty name, zero replicas). So `Flags` is
`flags` and `migStrategy: null` is no migStrategy, but `Replicas` is an unknown key.

Owns that reading: `read()` returns the document as upstream sees it, for the schema and the
rules, plus a warning for each key upstream reads under another spelling (it works, but only
for this reader). Must not judge values (the schema and rules do). Pure: standard library and
kubectl_gpu.findings only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kubectl_gpu import findings
from kubectl_gpu.findings import Finding, Path

_SCALAR = "scalar"  # a Go struct field holding a value: null is unset
_BLOCK = "block"  # a sharing block: a pointer for mps (null is unset), a value for timeSlicing

_PLUGIN = (
    "passDeviceSpecs",
    "deviceListStrategy",
    "deviceIDStrategy",
    "cdiAnnotationPrefix",
    "nvidiaCTKPath",
    "containerDriverRoot",
    "sharedDevicesAllocationPolicy",
)
_GFD = ("oneshot", "noTimestamp", "sleepInterval", "outputFile", "machineTypeFile")
_FLAGS = (
    "migStrategy",
    "failOnInitError",
    "mpsRoot",
    "nvidiaDriverRoot",
    "nvidiaDevRoot",
    "gdrcopyEnabled",
    "gdsEnabled",
    "mofedEnabled",
    "useNodeFeatureAPI",
    "deviceDiscoveryStrategy",
)
# The Go structs of api/config/v1: field -> _SCALAR, _BLOCK or the nested struct.
STRUCTS: dict[str, Any] = {
    "version": _SCALAR,
    "flags": {
        **dict.fromkeys(_FLAGS, _SCALAR),
        "plugin": dict.fromkeys(_PLUGIN, _SCALAR),
        "gfd": dict.fromkeys(_GFD, _SCALAR),
    },
    "resources": {"gpus": _SCALAR, "mig": _SCALAR},
    "sharing": {"timeSlicing": _BLOCK, "mps": _BLOCK},
    "imex": {"channelIDs": _SCALAR, "required": _SCALAR},
}
_BLOCK_OPTIONS = ("renameByDefault", "failRequestsGreaterThanOne")  # *bool/bool: null is unset


def read(data: object) -> tuple[object, list[Finding]]:
    """The document as the device plugin reads it, and a warning per re-spelt key."""
    if not isinstance(data, Mapping):
        return data, []
    found: list[Finding] = []
    result = _struct(data, STRUCTS, (), found)
    if result.get("version") == "":
        del result["version"]  # upstream: an empty version means v1
    return result, found


def _struct(
    body: Mapping[str, Any], fields: dict[str, Any], path: Path, found: list[Finding]
) -> dict[str, Any]:
    spelling = {name.lower(): name for name in fields}
    result: dict[str, Any] = {}
    for key, value in body.items():
        name = key if key in fields else spelling.get(str(key).lower(), key)
        # Go's JSON decoding reads every spelling, in sorted key order: the last one wins.
        spelt = [k for k in body if str(k).lower() == name.lower()] if name in fields else [key]
        if name != key:
            winner = max(spelt) if len(spelt) > 1 else ""
            found.append(_respelt(str(key), name, (*path, key), winner=winner))
        if key != max(spelt):
            continue
        kind = fields.get(name)
        if kind is None:
            result[name] = value  # not upstream's: the schema reports it
        elif kind == _BLOCK:
            result[name] = _block(name, value)
            if result[name] is None:
                del result[name]
        elif value is None:
            continue  # null leaves a Go struct field unset
        elif isinstance(kind, dict) and isinstance(value, Mapping):
            result[name] = _struct(value, kind, (*path, name), found)
        else:
            result[name] = value
    return result


def _block(name: str, body: object) -> object:
    if body is None:
        # mps is a pointer (null: no MPS); timeSlicing is a value whose own decoder then
        # finds no resources and fails, so it reads as an empty block.
        return {} if name == "timeSlicing" else None
    if not isinstance(body, Mapping):
        return body
    return {k: v for k, v in body.items() if not (v is None and k in _BLOCK_OPTIONS)}


def _respelt(key: str, name: str, path: Path, *, winner: str) -> Finding:
    if winner:
        problem = findings.error(
            path,
            "sharing.key-twice",
            f"'{key}' and '{name}' are the same key to the device plugin (it matches this key "
            f"case-insensitively): it reads both in sorted order, so '{winner}' wins",
            f"keep only '{name}'",
        )
    else:
        problem = findings.warning(
            path,
            "sharing.key-case",
            f"the device plugin matches '{key}' case-insensitively and reads it as '{name}'; "
            "other readers of this file, and the plugin itself inside sharing blocks and "
            "resource entries, are case-sensitive",
            f"write '{name}'",
        )
    return dataclasses.replace(problem, at_key=True)
