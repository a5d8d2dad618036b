"""Recording core/v1 Events the way the scheduler and kubelet do, with counts for repeats.

Owns one function, `record`, which writes an Event about an object (involvedObject with uid
and resourceVersion, reason, message, type, source component and host, first/last timestamps),
or bumps `count` and `lastTimestamp` of the same event, as the event recorder aggregates them.
Must not decide when to record: callers do.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from tests.kit.kube import ApiError
from tests.kit.node.podstatus import now
from tests.kit.plane.store import ApiStore

Obj = dict[str, Any]


@dataclass(frozen=True)
class Source:
    """Who reports: `default-scheduler`, or `kubelet` on a host."""

    component: str
    host: str = ""
    warning: bool = True


def record(store: ApiStore, about: Obj, reason: str, message: str, source: Source) -> None:
    meta = about["metadata"]
    namespace = str(meta.get("namespace") or "default")
    digest = hashlib.sha256(f"{meta.get('uid')}/{reason}/{message}".encode()).hexdigest()[:16]
    name = f"{meta['name']}.{digest}"
    stamp = now()
    try:
        existing = store.get("events", name, namespace)
    except ApiError:
        existing = None
    if existing is not None:
        count = int(existing.get("count") or 1) + 1
        store.patch("events", name, {"count": count, "lastTimestamp": stamp}, namespace=namespace)
        return
    origin = {"component": source.component, **({"host": source.host} if source.host else {})}
    store.create(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {
                "apiVersion": about.get("apiVersion", "v1"),
                "kind": about.get("kind", "Pod"),
                "name": meta["name"],
                "namespace": namespace,
                "uid": meta.get("uid", ""),
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "reason": reason,
            "message": message,
            "type": "Warning" if source.warning else "Normal",
            "source": origin,
            "reportingComponent": source.component,
            "reportingInstance": source.host or source.component,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
    )
