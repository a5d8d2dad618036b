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
from collections.abc import Callable, Collection
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
        index: Callable[[Json], str] | None = None,
    ) -> None:
        """`index`: a key of each kept object (a pod's node) that `items_at` finds it by."""
        self.api, self.url, self.keep, self.timing = api, url, keep, timing
        self.lists = 0  # LISTs made, for the rollout's own log line
        self._objects: dict[str, Json] = {}
        self._index = index or (lambda _: "")
        self._at: dict[str, dict[str, Json]] = {}  # index key -> uid -> object
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

    def items_at(self, keys: Collection[str]) -> list[Json]:
        """What is known now of the objects whose `index` key is one of `keys`: the cost
        follows `keys`, not the collection (a rollout looks at its 100 nodes among 5,000)."""
        with self._changed:
            return [o for k in keys for o in self._at.get(k, {}).values()]

    def look(self) -> list[Json]:
        """What is there now: polling, one LIST; watching, no request at all."""
        self.refresh()
        return self.items()

    def refresh(self) -> None:
        """Bring what is known up to date: polling, one LIST; watching, nothing to do."""
        if not self._live:
            self._list()

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
        found: list[tuple[str, Json | None]] = []  # trimmed page by page: memory follows keep
        version = ""
        while True:  # the pages by hand: the last page's resourceVersion is where a watch starts
            page = self.api.request("GET", self.url, query=query) or {}
            found.extend(self._trimmed(item) for item in page.get("items") or [])
            meta = page.get("metadata") or {}
            version = str(meta.get("resourceVersion") or version)
            if not meta.get("continue"):
                break
            query["continue"] = str(meta["continue"])
        self.lists += 1
        with self._changed:
            self._objects, self._at, self._version = {}, {}, version
            for uid, kept in found:
                self._set(uid, kept)
            self._changed.notify_all()

    def _trimmed(self, item: Any) -> tuple[str, Json | None]:
        """The object's uid and what is kept of it (None: nothing)."""
        if not isinstance(item, dict):
            return "", None
        uid = str((item.get("metadata") or {}).get("uid") or "")
        return uid, self.keep(item) if uid else None

    def _set(self, uid: str, kept: Json | None) -> bool:
        """Keep `kept` as the object `uid` (None: drop it); whether what is kept changed.
        Holds the lock."""
        if kept is None:
            return self._drop(uid)
        was = self._objects.get(uid)
        if was == kept:
            return False
        if was is not None:
            self._at.get(self._index(was), {}).pop(uid, None)
        self._objects[uid] = kept
        self._at.setdefault(self._index(kept), {})[uid] = kept
        return True

    def _drop(self, uid: str) -> bool:
        was = self._objects.pop(uid, None)
        if was is None:
            return False
        self._at.get(self._index(was), {}).pop(uid, None)
        return True

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
                    changed = self._drop(str(meta.get("uid") or ""))
                elif kind in ("ADDED", "MODIFIED"):
                    changed = self._set(*self._trimmed(obj))
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
