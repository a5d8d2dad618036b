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
    result = _struct(list(data.items()), STRUCTS, (), found)
    if result.get("version") == "":
        del result["version"]  # upstream: an empty version means v1
    return result, found


def fold(key: str) -> str:
    """Go's encoding/json key folding: ASCII upper case, other letters ToUpper(ToLower(r)).

    Simple (one letter to one letter) case mapping, so `ſ` folds with `s` and the Kelvin sign
    with `k`; `str.lower()` uses full mappings and misses both.
    """
    out = []
    for char in key:
        if char.isascii():
            out.append(char.upper())
            continue
        lower = char.lower() if len(char.lower()) == 1 else char
        out.append(lower.upper() if len(lower.upper()) == 1 else lower)
    return "".join(out)


def _struct(
    pairs: list[tuple[Any, Any]], fields: dict[str, Any], path: Path, found: list[Finding]
) -> dict[str, Any]:
    """Decode pairs into a Go struct as encoding/json does.

    A key that is not a field's exact name matches the field whose name folds the same. The
    plugin's JSON has its keys in sorted order (sigs.k8s.io/yaml marshals a map), and each
    spelling of one field decodes into the same value in turn: a scalar takes the last
    non-null one, a nested struct merges the fields of every spelling.
    """
    spelling = {fold(name): name for name in fields}
    spelt: dict[str, list[tuple[Any, Any]]] = {}
    result: dict[str, Any] = {}
    for key, value in sorted(pairs, key=lambda pair: str(pair[0])):
        name = key if key in fields else spelling.get(fold(str(key)), key)
        if name in fields:
            spelt.setdefault(name, []).append((key, value))
        else:
            result[name] = value  # not upstream's: the schema reports it
    for name, written in spelt.items():
        keys = [str(key) for key, _ in written]
        for key in keys:
            if key != name:
                found.append(_respelt(key, name, (*path, key), fields[name], keys))
        kind = fields[name]
        values = [value for _, value in written if value is not None or kind == _BLOCK]
        if not values:
            continue  # null leaves a Go struct field unset
        if isinstance(kind, dict) and all(isinstance(v, Mapping) for v in values):
            merged = [pair for v in values for pair in v.items()]
            result[name] = _struct(merged, kind, (*path, name), found)
        elif kind == _BLOCK:
            result[name] = _block(name, values[-1])
            if result[name] is None:
                del result[name]
        else:
            result[name] = values[-1]
    return result


def _block(name: str, body: object) -> object:
    if body is None:
        # mps is a pointer (null: no MPS); timeSlicing is a value whose own decoder then
        # finds no resources and fails, so it reads as an empty block.
        return {} if name == "timeSlicing" else None
    if not isinstance(body, Mapping):
        return body
    return {k: v for k, v in body.items() if not (v is None and k in _BLOCK_OPTIONS)}


def _respelt(key: str, name: str, path: Path, kind: object, keys: list[str]) -> Finding:
    if len(keys) > 1:
        others = ", ".join(f"'{k}'" for k in keys)
        merged = (
            "decodes each into the same section in sorted key order, so their fields are "
            f"merged and where both set one, '{keys[-1]}' wins"
            if isinstance(kind, dict)
            else f"reads each in sorted key order, so '{keys[-1]}' wins"
        )
        problem = findings.error(
            path,
            "sharing.key-twice",
            f"{others} are the same key to the device plugin (it matches this key "
            f"case-insensitively): it {merged}",
            f"write the section once, as '{name}'",
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
