"""The cluster's map: every node's report and the DRA allocations → the rows `map` prints.

Owns turning the agents' reports back into rows (the same join the agent ran, on the report's
merged allocations and inventory), filling in DRA rows' GPU index and model from their node's
report, the age of each report, and which GPU nodes have no report, with the reason. A GPU
node is one labelled `nvidia.com/gpu.present=true` or with any `nvidia.com/*` capacity.
Must not read anything or look at a clock (`now` is an argument). Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubectl_gpu import keys
from kubectl_gpu.dra import devicenames
from kubectl_gpu.findings import Finding
from kubectl_gpu.gpumap import join, report
from kubectl_gpu.gpumap.join import Row
from kubectl_gpu.gpumap.report import InventoryGpu, NodeReport

NO_REPORT = "no agent report (is the agent running on this node?)"
NO_REPORT_TYPE = (
    "no agent report: the GPUNodeReport resource is not installed (is the agent installed?)"
)
NO_NODE = "no such node"
NVIDIA_PREFIX = "nvidia.com/"
_DRA = "dra"


@dataclasses.dataclass(frozen=True)
class MapRow:
    """A row and when its node's agent saw it (None for rows read live: DRA)."""

    row: Row
    observed_at: str | None
    age_seconds: float | None
    placement: report.Placement | None = None  # the MIG device's GPU instance, in slices

    @property
    def placement_text(self) -> str | None:
        """`start:size` in memory slices, as `nvidia-smi mig -lgi` prints a placement."""
        return f"{self.placement.start}:{self.placement.size}" if self.placement else None

    def to_dict(self) -> dict[str, object]:
        """The `-o json` row (schemas/map-rows.v1.json), with `observed_at` and
        `mig_placement` added.

        Every field of a row is a plain value, so a shallow read gives what `asdict` would,
        at a tenth of its cost (100,000 rows: docs/architecture.md, "Budgets").
        """
        found: dict[str, object] = {name: getattr(self.row, name) for name in _ROW_FIELDS}
        found["plane"] = self.row.plane
        found["observed_at"] = self.observed_at
        found["mig_placement"] = dataclasses.asdict(self.placement) if self.placement else None
        return found


_ROW_FIELDS = tuple(f.name for f in dataclasses.fields(Row))


@dataclasses.dataclass(frozen=True)
class NodeFacts:
    """What the map needs of a Node: its name and whether it has NVIDIA GPUs."""

    name: str
    has_gpus: bool


@dataclasses.dataclass(frozen=True)
class Missing:
    """A GPU node the map has no report for, and why."""

    node: str
    reason: str


@dataclasses.dataclass(frozen=True)
class ClusterMap:
    """Rows held, nodes without a report, and each node's findings; `free()` on demand."""

    rows: tuple[MapRow, ...]
    missing: tuple[Missing, ...]
    findings: tuple[tuple[str, Finding], ...]
    reports: tuple[NodeReport, ...] = ()
    now: dt.datetime | None = None

    def free(self) -> tuple[MapRow, ...]:
        """The devices no container holds (from the reports' healthy devices), node by node."""
        found = []
        for node_report in self.reports:
            observed, age = node_report.generated_at, _age(node_report.generated_at, self.now)
            node_map = join.make(node_report.sources(), (), node_report.inventory())
            found += _placed(node_map.free, node_report, observed, age)
        return tuple(found)


def node_facts(obj: Mapping[str, Any]) -> NodeFacts:
    """A Node object's name and whether GFD/NFD or a device plugin says it has NVIDIA GPUs."""
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    labelled = (meta.get("labels") or {}).get(keys.GPU_PRESENT_LABEL) == "true"
    capacity = status.get("capacity") or {}
    advertised = any(str(k).startswith(NVIDIA_PREFIX) for k in capacity)
    return NodeFacts(str(meta.get("name", "")), labelled or advertised)


def make(
    reports: Sequence[NodeReport],
    dra_rows: Sequence[Row],
    nodes: Sequence[NodeFacts],
    now: dt.datetime,
    reasons: Mapping[str, str] | None = None,
) -> ClusterMap:
    """Join the reports (and DRA rows) into the cluster's map.

    `reasons` says why a node has no usable report where the default `NO_REPORT` would be
    wrong (`unreadable(...)`, `NO_REPORT_TYPE`, `NO_NODE`); those nodes are listed even when
    they are not known to have GPUs.
    """
    rows: list[MapRow] = []
    local_dra: list[MapRow] = []
    problems: list[tuple[str, Finding]] = []
    ordered = tuple(sorted(reports, key=lambda r: r.node))
    for node_report in ordered:
        # only the held devices: free ones are joined when asked for (`ClusterMap.free`)
        held = dataclasses.replace(node_report.sources(), registered=None, allocatable=None)
        node_map = join.make(held, (), node_report.inventory())
        observed, age = node_report.generated_at, _age(node_report.generated_at, now)
        placed = _placed(node_map.rows, node_report, observed, age)
        local_dra += [m for m in placed if m.row.source == _DRA]
        rows += [m for m in placed if m.row.source != _DRA]
        problems += [(node_report.node, f) for f in node_report.findings]
    api_rows = _located(dra_rows, reports)
    placements = {m.uuid: m.placement for r in reports for g in r.gpus for m in g.mig_devices}
    rows += [
        m if m.placement else dataclasses.replace(m, placement=placements.get(m.row.mig_uuid or ""))
        for m in _joined_dra(local_dra, api_rows)
    ]
    rows.sort(key=lambda r: r.row.node or "")  # stable: each node's own order stays
    missing = _missing(nodes, {r.node for r in reports}, reasons or {})
    return ClusterMap(tuple(rows), missing, tuple(problems), ordered, now)


def _placed(
    rows: Iterable[Row], node_report: NodeReport, observed: str, age: float | None
) -> list[MapRow]:
    placements = {m.uuid: m.placement for g in node_report.gpus for m in g.mig_devices}
    return [MapRow(r, observed, age, placements.get(r.mig_uuid or "")) for r in rows]


def _joined_dra(local: Sequence[MapRow], api_rows: Sequence[Row]) -> list[MapRow]:
    """The agents' DRA allocations (PodResources `dynamic_resources`: which container holds
    which device, seen on the node) joined with the API's claims (which physical GPU, share
    and config). An API row wins; a container only the node knows is filled in; a node-local
    allocation the API did not show (claims not readable, say) is kept, resolved to its GPU
    where another row names the same device."""
    held = {_holder(m.row)[:4] for m in local}  # a set: linear in rows (docs/architecture.md)
    found: list[MapRow] = []
    for row in api_rows:
        if row.container is None and _holder(row)[:4] in held:
            continue  # the node names the container(s): their rows below stand for it
        found.append(MapRow(row, None, None))
    shown = {_holder(m.row) for m in found}
    by_device = {(r.node, r.device_id): r for r in api_rows}
    for mine in local:
        if _holder(mine.row) in shown:
            continue
        api = by_device.get((mine.row.node, mine.row.device_id))
        row = mine.row
        if api is not None:
            row = dataclasses.replace(
                api,
                namespace=row.namespace,
                pod=row.pod,
                pod_uid=row.pod_uid or api.pod_uid,
                container=row.container,
            )
        found.append(dataclasses.replace(mine, row=row))
    return found


def _holder(row: Row) -> tuple[str | None, ...]:
    return (row.node, row.device_id, row.namespace, row.pod, row.container)


def _age(generated_at: str, now: dt.datetime | None) -> float | None:
    when = report.parse_time(generated_at)
    return None if when is None or now is None else max(0.0, (now - when).total_seconds())


def _located(dra_rows: Iterable[Row], reports: Sequence[NodeReport]) -> list[Row]:
    """DRA slices carry UUIDs only: the node's report knows the GPU's NVML index and model,
    and the UUID of a MIG device made at prepare (DynamicMIG), which its slice never names."""
    gpus: dict[tuple[str | None, str], InventoryGpu] = {
        (r.node, g.uuid.lower()): g for r in reports for g in r.gpus
    }
    found = []
    for row in dra_rows:
        gpu = gpus.get((row.node, (row.gpu_uuid or "").lower()))
        if gpu is not None:
            row = dataclasses.replace(
                row,
                gpu_index=gpu.index,
                gpu_model=gpu.model or row.gpu_model,
                mig_uuid=row.mig_uuid or _made_mig(row, gpu),
            )
        found.append(row)
    return sorted(found, key=_dra_order)


def _made_mig(row: Row, gpu: InventoryGpu) -> str | None:
    """The MIG device NVML shows where the row's device name puts it (profile, placement)."""
    name = devicenames.parse_mig(row.device_id.rsplit("/", 1)[-1])
    if row.mig_profile is None or name is None:
        return None
    if gpu.minor is not None and gpu.minor != name.parent_minor:
        return None
    for mig in gpu.mig_devices:
        start = mig.placement.start if mig.placement else None
        if mig.profile == row.mig_profile and start == name.placement_start:
            return mig.uuid
    return None


def _dra_order(row: Row) -> tuple[object, ...]:
    return (
        row.node or "",
        row.gpu_index is None,
        row.gpu_index or 0,
        row.gpu_uuid or "",
        row.mig_uuid or "",
        row.device_id,
        row.namespace or "",
        row.pod or "",
        row.container or "",
    )


def unreadable(why: str) -> str:
    """The reason given for a node whose report object exists but has not the v1 shape."""
    return f"its report cannot be read: {why}"


def _missing(
    nodes: Sequence[NodeFacts], reported: set[str], reasons: Mapping[str, str]
) -> tuple[Missing, ...]:
    found = [Missing(n, why) for n, why in reasons.items() if n not in reported]
    found += [
        Missing(n.name, NO_REPORT)
        for n in nodes
        if n.has_gpus and n.name not in reported and n.name not in reasons
    ]
    return tuple(sorted(found, key=lambda m: m.node))
