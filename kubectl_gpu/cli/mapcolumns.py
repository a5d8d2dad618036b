"""The table of `kubectl gpu map`: its columns (default and `-o wide`, offline and from the
cluster) and the cell texts, UUIDs shortened to their first 8 digits in the default table.
Must not read anything or choose rows (`cli.map` does); cell functions stay cheap, since
`map -A` renders 100,000 rows.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable
from typing import Any

from kubectl_gpu.cli import durations
from kubectl_gpu.cli.render import Column
from kubectl_gpu.gpumap.clustermap import MapRow
from kubectl_gpu.gpumap.join import Row
from kubectl_gpu.gpumap.rows import device_text

_UUID = re.compile(r"([0-9a-fA-F]{8})-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def columns(output: str) -> list[Column]:
    """The table's columns; `table` shortens UUIDs to their first 8 digits, `wide` does not.

    The default ones answer "which pod has which physical GPU": node, GPU index and UUID,
    the part of it held (DEVICE) and the pod; with realistic names (EKS node names,
    Deployment pod names) they fit a 120-column terminal. `-o wide` adds the plane, model,
    MIG UUID, profile, placement, instances, device ID, resource, replica, container and
    the DRA columns."""
    shown: Callable[[str | None], str | None]
    shown = _full if output == "wide" else _Abbreviated()
    field = operator.attrgetter  # per cell, a third of a lambda's cost (100,000 rows)
    return [
        Column("NODE", field("node")),
        Column("PLANE", field("plane"), wide_only=True),
        Column("GPU", field("gpu_index")),
        Column("MODEL", field("gpu_model"), wide_only=True),
        Column("UUID", lambda r: shown(r.gpu_uuid)),
        Column("DEVICE", device_text),
        Column("MIG", lambda r: shown(r.mig_uuid), wide_only=True),
        Column("PROFILE", field("mig_profile"), wide_only=True),
        Column("GI/CI", _instances, wide_only=True),
        Column("DEVICE-ID", lambda r: shown(r.device_id), wide_only=True),
        Column("RESOURCE", field("resource"), wide_only=True),
        Column("REPLICA", field("replica"), wide_only=True),
        Column("POD", _pod),
        Column("CONTAINER", field("container"), wide_only=True),
        Column("SHARING", lambda r: r.sharing, wide_only=True),
        Column("SHARE", lambda r: _share(r, shown), wide_only=True),
        Column("COUNTERS", lambda r: r.counters, wide_only=True),
        Column("SOURCE", lambda r: r.source, wide_only=True),
    ]


def cluster_columns(output: str) -> list[Column]:
    """The offline columns read through a `MapRow`, plus the MIG device's placement (the
    agent reads it from NVML) and the age of the node's report."""
    found = []
    for c in columns(output):
        found.append(Column(c.header, _through_row(c.value), c.wide_only))
        if c.header == "PROFILE":
            found.append(Column("PLACEMENT", lambda r: r.placement_text, wide_only=True))
    return [*found, Column("AGE", lambda r: durations.human(r.age_seconds))]


def _through_row(value: Callable[[Row], Any]) -> Callable[[MapRow], Any]:
    return lambda r: value(r.row)


def abbreviate(text: str | None) -> str | None:
    """`GPU-11ba558d-3437-…` → `GPU-11ba558d`, inside any ID (`…::2`, `MIG-GPU-…/1/0`)."""
    return None if text is None or "-" not in text else _UUID.sub(_first_group, text)


class _Abbreviated:
    """`abbreviate`, each UUID shortened once: a GPU's UUID is on many rows, and a replica's
    device ID is its GPU's and `::N` (100,000 regex substitutions took 0.5 s)."""

    def __init__(self) -> None:
        self._short = functools.lru_cache(maxsize=4096)(abbreviate)

    def __call__(self, text: str | None) -> str | None:
        if text is None or "-" not in text:
            return None
        head, separator, tail = text.rpartition("::")
        if not separator:
            return self._short(text)
        return self._part(head) + separator + self._part(tail)

    def _part(self, text: str) -> str:
        return (self._short(text) or text) if "-" in text else text


def _first_group(match: re.Match[str]) -> str:
    return match.group(1)  # a function: re's template expansion costs 3x more per row


def _full(text: str | None) -> str | None:
    return text


def _share(row: Row, shown: Callable[[str | None], str | None]) -> str | None:
    """A DRA share of a device and what it consumes: `a1b2c3d4 memory=10Gi`."""
    if row.share_id is None:
        return None
    return " ".join(p for p in (shown(row.share_id), row.consumed) if p)


def _instances(row: Row) -> str | None:
    if row.gpu_instance is None:
        return None
    return "/".join(str(i) for i in (row.gpu_instance, row.compute_instance) if i is not None)


def _pod(row: Row) -> str | None:
    return f"{row.namespace}/{row.pod}" if row.pod is not None else row.pod_uid
