"""The `devices` field of a shared resource, as the device plugin parses it.

Owns upstream's grammar for it (`all`, a count above 0, or a list of GPU indices, MIG
indices `i:j` and GPU/MIG UUIDs in the spellings Go's uuid.Parse accepts) and the
`sharing.bad-devices` finding with upstream's own error. Must not decide whether a valid
value takes effect (the sharing blocks' rules warn that upstream ignores it). Pure:
standard library and kubectl_gpu.findings only.
"""

from __future__ import annotations

import re
from typing import Any

from kubectl_gpu.findings import Finding, Path
from kubectl_gpu.sharing import catalogue, document

_UUID_DASHED = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# the four spellings Go's uuid.Parse accepts
_UUID = re.compile(
    rf"{_UUID_DASHED}|\{{{_UUID_DASHED}\}}|(?i:urn:uuid:){_UUID_DASHED}|[0-9a-fA-F]{{32}}"
)
_UINT = re.compile(r"[0-9]+")
_UINT_MAX = 2**64 - 1


def parse_error(devices: object, path: Path) -> Finding | None:
    """Upstream's parse error for `devices` (all, a count > 0, or a list of device refs)."""
    if isinstance(devices, list):
        return _device_list_error(devices, path)
    if isinstance(devices, str) and devices != "all":
        upstream = f"devices set as '{devices}' but the only valid string input is 'all'"
        problem = f"'{devices}' is not a devices value (all, a count or a list)"
        return catalogue.find("sharing.bad-devices", path, problem=problem, upstream=upstream)
    count = document.whole_number(devices)
    if count is not None and count <= 0:
        upstream = f"devices set as '{count}' but a count of devices must be > 0"
        problem = f"a count of devices must be at least 1, not {count}"
        return catalogue.find("sharing.bad-devices", path, problem=problem, upstream=upstream)
    return None  # "all", a positive count, or a type the schema reports


def _device_list_error(devices: list[Any], path: Path) -> Finding | None:
    for index, item in enumerate(devices):
        number = document.whole_number(item)
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
        where = (*path, index)
        return catalogue.find("sharing.bad-devices", where, problem=problem, upstream=upstream)
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
