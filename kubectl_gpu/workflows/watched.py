"""A collection a long wait looks at many times, kept current by one LIST and one watch.

Owns how a rollout looks at the plugin's pods and the nodes' capacity: one LIST, then (in real
time) one watch from that list's resourceVersion in a thread of its own, whose events keep
the picture current, so a look costs no request and a change wakes the waiter the moment the
server sends it (client-go's informers work the same way: a LIST, then a watch from its
resourceVersion, as the Kubernetes API concepts page describes "efficient detection of
changes").
A watch the server ends is started again from the last resourceVersion seen; one that expires
(410 Gone, an ERROR event) or drops is replaced by a new LIST; one the user may not open (403)
leaves the waiter polling: one LIST per look, as before. With an injected clock (`Timing.live`
false: tests) it always polls, so time passes only as the test says. Each object is kept only
as `keep` trims it (None: not kept), so memory follows what is waited for, not the collection,
and a waiter wakes only when what is kept changed.
Must not decide what an object's state means.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kubectl_gpu import cluster, errors
from kubectl_gpu.workflows.waiting import Timing

log = logging.getLogger(__name__)
Json = dict[str, Any]
WATCH_SECONDS = 15  # the server ends each watch after this; the next starts where it ended
# (short: a command that ends leaves its watch thread behind at most this long)
RELIST_PAUSE = 0.5  # after a dropped watch, before listing again (the server may be busy)


class Watched:
    """The objects of `url` (trimmed by `keep`), by uid."""

    def __init__(
        self,
        api: cluster.Api,
        url: str,
        keep: Callable[[Json], Json | None],
        timing: Timing,
    ) -> None:
        self.api, self.url, self.keep, self.timing = api, url, keep, timing
        self.lists = 0  # LISTs made, for the rollout's own log line
        self._objects: dict[str, Json] = {}
        self._changed = threading.Condition()
        self._version = ""
        self._stop = threading.Event()
        self._live = timing.live
        self._thread: threading.Thread | None = None

    def start(self) -> Watched:
        """List once; in real time, start the watch that keeps the list current."""
        self._list()
        if self._live:
            self._thread = threading.Thread(target=self._watch, name="watch", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop watching (the thread ends at the watch's next event or its end)."""
        self._stop.set()

    def __enter__(self) -> Watched:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.close()

    def items(self) -> list[Json]:
        """What is known now."""
        with self._changed:
            return list(self._objects.values())

    def look(self) -> list[Json]:
        """What is there now: polling, one LIST; watching, no request at all."""
        if not self._live:
            self._list()
        return self.items()

    def pause(self, seconds: float) -> None:
        """Wait `seconds`, or less when watching and something changed."""
        if not self._live:
            self.timing.sleep(seconds)
            return
        with self._changed:
            self._changed.wait(timeout=max(0.0, seconds))

    # ---- the list and the watch ---------------------------------------------------------

    def _list(self) -> None:
        query = {"limit": str(cluster.PAGE_SIZE)}
        found: dict[str, Json] = {}
        version = ""
        while True:  # the pages by hand: the last page's resourceVersion is where a watch starts
            page = self.api.request("GET", self.url, query=query) or {}
            for item in page.get("items") or []:
                self._put(found, item)
            meta = page.get("metadata") or {}
            version = str(meta.get("resourceVersion") or version)
            if not meta.get("continue"):
                break
            query["continue"] = str(meta["continue"])
        self.lists += 1
        with self._changed:
            self._objects, self._version = found, version
            self._changed.notify_all()

    def _put(self, into: dict[str, Json], item: Any) -> bool:
        """Keep `item` as trimmed (or drop it); whether what is kept changed."""
        if not isinstance(item, dict):
            return False
        uid = str((item.get("metadata") or {}).get("uid") or "")
        kept = self.keep(item)
        if uid and kept is not None:
            changed = into.get(uid) != kept
            into[uid] = kept
            return changed
        return bool(uid) and into.pop(uid, None) is not None

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                self._follow()
            except errors.ClusterError as e:
                if self._stop.is_set():
                    return
                if e.status == 403:  # may list but not watch: poll instead
                    log.info("cannot watch %s (%s); looking with one LIST each time", self.url,
                             e.message)  # fmt: skip
                    self._live = False
                    with self._changed:
                        self._changed.notify_all()
                    return
                log.debug("watch of %s ended (%s); listing again", self.url, e.message)
                self._stop.wait(RELIST_PAUSE)
                self._relist()

    def _follow(self) -> None:
        """One watch, until the server ends it; a 410 lists again."""
        stream = self.api.watch(self.url, resource_version=self._version, seconds=WATCH_SECONDS)
        for event in stream:
            if self._stop.is_set():
                return
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":  # 410 Gone: too old a resourceVersion; list afresh
                self._relist()
                return
            meta = obj.get("metadata") or {} if isinstance(obj, dict) else {}
            with self._changed:
                changed = False
                if kind == "DELETED":
                    changed = self._objects.pop(str(meta.get("uid") or ""), None) is not None
                elif kind in ("ADDED", "MODIFIED"):
                    changed = self._put(self._objects, obj)
                self._version = str(meta.get("resourceVersion") or self._version)
                # the waiter wakes only for what it keeps: a node's heartbeat, or a pod of
                # another workload, changes nothing it reads
                if changed:
                    self._changed.notify_all()

    def _relist(self) -> None:
        try:
            self._list()
        except errors.ClusterError as e:
            log.debug("listing %s again failed: %s", self.url, e.message)


def picked(obj: Json, paths: dict[str, tuple[str, ...]]) -> Json:
    """`obj` with only the named top-level sections' named fields (() keeps the whole section)."""
    out: Json = {}
    for section, fields in paths.items():
        value = obj.get(section)
        if not isinstance(value, dict):
            continue
        out[section] = dict(value) if not fields else {f: value[f] for f in fields if f in value}
    return out
