"""Server-side printing: `meta.k8s.io/v1` Tables for `kubectl get`'s human output.

Owns the columns kubectl shows for nodes, pods, daemonsets, configmaps and namespaces
(with their `-o wide` extras at priority 1), the default Name/Age table for everything
else, Age strings in the real server's short form (`45s`, `5m30s`, `3d4h`) and Table
bodies for lists, single objects and watch events. Used only when the client's Accept
header asks for `as=Table`. Must not change what is stored.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

from tests.fakes.apiserver.records import Record
from tests.fakes.apiserver.resources import ResourceType

Obj = dict[str, Any]
Cell = Callable[[Obj], Any]
Column = tuple[str, int, Cell]  # header, priority (1 = only with -o wide), cell


def wants_table(accept: str) -> bool:
    return any("as=Table" in part and "g=meta.k8s.io" in part for part in accept.split(","))


def age(obj: Obj) -> str:
    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    if not stamp:
        return "<unknown>"
    created = dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")
    elapsed = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - created
    return human_duration(int(elapsed.total_seconds()))


def human_duration(seconds: int) -> str:
    """The real server's compact durations (k8s.io/apimachinery duration.HumanDuration)."""
    if seconds < -1:
        return "<invalid>"
    seconds = max(seconds, 0)
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    steps: list[tuple[bool, str, int, str, int]] = [
        (seconds < 120, "s", seconds, "", 0),
        (minutes < 10, "m", minutes, "s", seconds % 60),
        (minutes < 180, "m", minutes, "", 0),
        (hours < 8, "h", hours, "m", minutes % 60),
        (hours < 48, "h", hours, "", 0),
        (hours < 192, "d", days, "h", hours % 24),
        (hours < 24 * 365 * 2, "d", days, "", 0),
        (hours < 24 * 365 * 8, "y", days // 365, "d", days % 365),
    ]
    for applies, unit, amount, sub_unit, sub_amount in steps:
        if applies:
            return f"{amount}{unit}" + (f"{sub_amount}{sub_unit}" if sub_amount else "")
    return f"{days // 365}y"


def _get(obj: Obj, path: str, default: Any = None) -> Any:
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return default if node in (None, "") else node


def _node_status(node: Obj) -> str:
    ready = [c for c in _get(node, "status.conditions", []) if c.get("type") == "Ready"]
    state = (
        {"True": "Ready", "False": "NotReady"}.get(ready[0].get("status"), "Unknown")
        if ready
        else "Unknown"
    )
    return state + (",SchedulingDisabled" if _get(node, "spec.unschedulable") else "")


def _node_roles(node: Obj) -> str:
    labels = _get(node, "metadata.labels", {})
    roles = {k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/")}
    roles |= {v for k, v in labels.items() if k == "kubernetes.io/role"}
    return ",".join(sorted(r for r in roles if r)) or "<none>"


def _address(kind: str) -> Cell:
    def cell(node: Obj) -> str:
        found = [a["address"] for a in _get(node, "status.addresses", []) if a.get("type") == kind]
        return found[0] if found else "<none>"

    return cell


def _pod_status(pod: Obj) -> str:
    if _get(pod, "metadata.deletionTimestamp"):
        return "Terminating"
    for status in _get(pod, "status.containerStatuses", []):
        for state in ("waiting", "terminated"):
            reason = _get(status, f"state.{state}.reason")
            if reason:
                return str(reason)
    return str(_get(pod, "status.reason") or _get(pod, "status.phase", "Unknown"))


def _pod_ready(pod: Obj) -> str:
    statuses = _get(pod, "status.containerStatuses", [])
    ready = sum(1 for s in statuses if s.get("ready"))
    return f"{ready}/{len(_get(pod, 'spec.containers', []))}"


def _pod_restarts(pod: Obj) -> str:
    return str(
        sum(int(s.get("restartCount") or 0) for s in _get(pod, "status.containerStatuses", []))
    )


def _field(path: str, default: Any = "<none>") -> Cell:
    return lambda obj: _get(obj, path, default)


def _node_selector(ds: Obj) -> str:
    selector = _get(ds, "spec.template.spec.nodeSelector", {})
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>"


def _name(obj: Obj) -> str:
    return str(_get(obj, "metadata.name", ""))


COLUMNS: dict[tuple[str, str], list[Column]] = {
    ("", "nodes"): [
        ("Name", 0, _name), ("Status", 0, _node_status), ("Roles", 0, _node_roles),
        ("Age", 0, age), ("Version", 0, _field("status.nodeInfo.kubeletVersion", "")),
        ("Internal-IP", 1, _address("InternalIP")), ("External-IP", 1, _address("ExternalIP")),
        ("OS-Image", 1, _field("status.nodeInfo.osImage", "<unknown>")),
        ("Kernel-Version", 1, _field("status.nodeInfo.kernelVersion", "<unknown>")),
        ("Container-Runtime", 1, _field("status.nodeInfo.containerRuntimeVersion", "<unknown>")),
    ],
    ("", "pods"): [
        ("Name", 0, _name), ("Ready", 0, _pod_ready), ("Status", 0, _pod_status),
        ("Restarts", 0, _pod_restarts), ("Age", 0, age), ("IP", 1, _field("status.podIP")),
        ("Node", 1, _field("spec.nodeName")),
        ("Nominated Node", 1, _field("status.nominatedNodeName")),
        ("Readiness Gates", 1, lambda _: "<none>"),
    ],
    ("apps", "daemonsets"): [
        ("Name", 0, _name), ("Desired", 0, _field("status.desiredNumberScheduled", 0)),
        ("Current", 0, _field("status.currentNumberScheduled", 0)),
        ("Ready", 0, _field("status.numberReady", 0)),
        ("Up-to-date", 0, _field("status.updatedNumberScheduled", 0)),
        ("Available", 0, _field("status.numberAvailable", 0)),
        ("Node Selector", 0, _node_selector), ("Age", 0, age),
    ],
    ("", "configmaps"): [
        ("Name", 0, _name),
        ("Data", 0, lambda cm: len(cm.get("data") or {}) + len(cm.get("binaryData") or {})),
        ("Age", 0, age),
    ],
    ("", "namespaces"): [
        ("Name", 0, _name), ("Status", 0, _field("status.phase", "")), ("Age", 0, age),
    ],
}  # fmt: skip
DEFAULT_COLUMNS: list[Column] = [("Name", 0, _name), ("Age", 0, age)]


def _definitions(columns: list[Column]) -> list[Obj]:
    return [
        {"name": header, "type": "string", "format": "name" if header == "Name" else "",
         "description": header, "priority": priority}
        for header, priority, _ in columns
    ]  # fmt: skip


def _row(columns: list[Column], obj: Obj, include: str) -> Obj:
    row: Obj = {"cells": [cell(obj) for _, _, cell in columns]}
    if include == "Object":
        row["object"] = obj
    elif include != "None":
        partial = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1"}
        row["object"] = {**partial, "metadata": obj.get("metadata") or {}}
    return row


def table(
    rtype: ResourceType, records: list[Record], meta: Obj, include: str, headers: bool = True
) -> Obj:
    """A Table of `records`; `include` is the includeObject query value (default Metadata)."""
    columns = COLUMNS.get(rtype.storage, DEFAULT_COLUMNS)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": _definitions(columns) if headers else [],
        "rows": [_row(columns, r.obj, include) for r in records],
    }


def watch_line(rtype: ResourceType, event_type: str, record: Record, first: bool) -> bytes:
    """A watch event whose object is a one-row Table; only the first carries the columns."""
    meta = {"resourceVersion": record.obj["metadata"].get("resourceVersion", "")}
    body = table(rtype, [record], meta, "Metadata", headers=first)
    return json.dumps({"type": event_type, "object": body}).encode() + b"\n"
