"""Edits to a device-plugin config: the replica edit behind `kubectl gpu share`, and turning
sharing off.

Owns how an edit keeps the rest of the document (every other key, `version: v1` added when
absent) and carries a block over when the strategy changes. Each edit returns a copy and
leaves its input untouched; it raises UsageError for arguments the device plugin would
reject. Must not check a document (rules.py does) nor read or write files. Pure: standard
library and kubectl_gpu.errors only.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kubectl_gpu import errors
from kubectl_gpu.sharing import document, names, strategies


def with_replicas(  # noqa: PLR0913 - the share command's options, all keyword-only
    doc: Mapping[str, Any] | None,
    replicas: int,
    *,
    resource: str = names.DEFAULT_RESOURCE,
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
    sharing = document.mapping(edited.get("sharing")) or {}
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
    minimum = strategies.MIN_REPLICAS
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < minimum:
        raise errors.UsageError(
            f"replicas must be a whole number >= {minimum}, not {replicas!r}",
            hint="to turn sharing off, remove the sharing block instead",
        )
    foreign = "/" in resource and not resource.startswith(names.RESOURCE_PREFIX)
    problem = (
        "only the nvidia.com/ prefix is allowed" if foreign else names.upstream_error(resource)
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
    wanted = names.normalise_resource_name(resource)
    result = list(entries) if isinstance(entries, list) else []
    for index, entry in enumerate(result):
        if isinstance(entry, Mapping) and names.valid_name(entry.get("name")) == wanted:
            result[index] = {**entry, "replicas": replicas}
            return result
    result.append({"name": resource, "replicas": replicas})
    return result
