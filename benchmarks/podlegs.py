"""Where a pod restart's time goes, node by node: a watch of one namespace's pods during a
rollout, and each restart cut into its legs.

For every node whose pod of a DaemonSet was replaced: the old pod marked for deletion (by
whoever deleted it: `share` or the DaemonSet controller's own rolling update) → the new pod
created by the DaemonSet controller → bound to the node by the scheduler → Ready (KWOK) → the
old pod gone. The watch is the benchmark's own (its own connection and user agent, so the
audit log's count of the command's requests stays the command's). Used by benchmarks.rollout
to compare Kubernetes' own rollout with `share`'s on the same plane.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import ssl
import statistics
import threading
import time
from typing import Any

Obj = dict[str, Any]


@dataclasses.dataclass
class _Pod:
    node: str = ""
    owner: str = ""
    added: float | None = None
    bound: float | None = None
    ready: float | None = None
    marked: float | None = None  # deletionTimestamp first seen
    gone: float | None = None


class PodTimeline:
    """Every pod event of `namespace` from now on, timed on arrival, in a thread of its own."""

    def __init__(self, plane: Any, namespace: str) -> None:
        self.plane, self.namespace = plane, namespace
        self.pods: dict[str, _Pod] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="podlegs", daemon=True)

    def start(self) -> PodTimeline:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _connection(self) -> http.client.HTTPSConnection:
        context = ssl.create_default_context(cafile=str(self.plane.creds.ca_cert))
        return http.client.HTTPSConnection("127.0.0.1", self.plane.port, context=context)

    def _get(self, path: str) -> http.client.HTTPResponse:
        connection = self._connection()
        headers = {"Authorization": f"Bearer {self.plane.creds.admin_token}",
                   "User-Agent": "kubectl-gpu-benchmark/podlegs"}  # fmt: skip
        connection.request("GET", path, headers=headers)
        return connection.getresponse()

    def _run(self) -> None:
        base = f"/api/v1/namespaces/{self.namespace}/pods"
        listed = json.loads(self._get(base).read())
        now = time.monotonic()
        with self._lock:
            for item in listed.get("items") or []:
                self._seen("ADDED", item, now, known=True)
        version = listed["metadata"]["resourceVersion"]
        while not self._stop.is_set():
            query = "?watch=true&allowWatchBookmarks=true&timeoutSeconds=300"
            response = self._get(f"{base}{query}&resourceVersion={version}")
            while not self._stop.is_set():
                line = response.readline()
                if not line:
                    break
                event = json.loads(line)
                obj = event.get("object") or {}
                version = (obj.get("metadata") or {}).get("resourceVersion") or version
                if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                    with self._lock:
                        self._seen(event["type"], obj, time.monotonic())

    def _seen(self, kind: str, obj: Obj, now: float, known: bool = False) -> None:
        meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
        pod = self.pods.setdefault(meta["uid"], _Pod())
        owners = meta.get("ownerReferences") or [{}]
        pod.owner = str(owners[0].get("name") or "")
        if pod.added is None and not known:
            pod.added = now
        if spec.get("nodeName") and not pod.node:
            pod.node, pod.bound = spec["nodeName"], (None if known else now)
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in status.get("conditions") or [])  # fmt: skip
        if ready and pod.ready is None and not known:
            pod.ready = now
        if meta.get("deletionTimestamp") and pod.marked is None:
            pod.marked = now
        if kind == "DELETED":
            pod.gone = now
            pod.marked = pod.marked or now

    def legs(self, owner: str, since: float, until: float) -> dict[str, Any]:
        """Median and 90th percentile, in seconds, of each leg of the restarts of `owner`'s pods
        whose old pod was marked for deletion between `since` and `until`."""
        with self._lock:
            pods = [p for p in self.pods.values() if p.owner == owner]
        old = {p.node: p for p in pods if p.marked is not None and since <= p.marked <= until}
        new = {p.node: p for p in pods if p.added is not None and p.added >= since}
        spans: dict[str, list[float]] = {"marked → created": [], "created → bound": [],
                                         "bound → Ready": [], "marked → Ready": [],
                                         "marked → old pod gone": []}  # fmt: skip
        for node, was in old.items():
            came = new.get(node)
            if came is None or was.marked is None or came.added is None:
                continue
            pairs = (("marked → created", was.marked, came.added),
                     ("created → bound", came.added, came.bound),
                     ("bound → Ready", came.bound, came.ready),
                     ("marked → Ready", was.marked, came.ready),
                     ("marked → old pod gone", was.marked, was.gone))  # fmt: skip
            for name, start, end in pairs:
                if start is not None and end is not None:
                    spans[name].append(end - start)
        return {"restarts": len(old), **{name: _figures(v) for name, v in spans.items()}}


def _figures(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"median {statistics.median(ordered):.2f} s, p90 {p90:.2f} s"
