"""The stand-in's object store: every resource's objects, one global resourceVersion.

Owns `objects[(group, resource)][(namespace, name)] -> Record`, the strictly increasing
resourceVersion, commit order, watch history and watchers, change subscribers, and the
cascades a real server performs (a namespace or CRD taking its objects with it, finalizers
holding a deletion). Writes from HTTP and from tests (`seeding.py`) meet here under one
lock, so both get the same semantics. `seeding.Store` adds the by-name API on top.
Must not parse URLs or write to sockets.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import collections
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.apiserver import errors, objects
from tests.fakes.apiserver.records import ADDED, DELETED, MODIFIED, Change, ObjectKey, Record
from tests.fakes.apiserver.resources import Registry, ResourceType, types_from_crd
from tests.fakes.apiserver.selectors import FieldTerm, Requirement, fields_match, labels_match
from tests.fakes.apiserver.watch import Watcher

Callback = Callable[[str, ObjectKey, dict[str, Any]], None]
Key = tuple[str, str]  # (namespace, name); "" namespace for cluster-scoped objects
_NAMESPACES = ("", "namespaces")
_CRDS = ("apiextensions.k8s.io", "customresourcedefinitions")
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


@dataclass(frozen=True)
class ListQuery:
    labels: tuple[Requirement, ...] = ()
    fields: tuple[FieldTerm, ...] = ()
    limit: int = 0
    continue_token: str = ""


@dataclass
class ListPage:
    items: list[Record]
    rv: int
    continue_token: str = ""
    remaining: int | None = None


@dataclass
class _Subscribers:
    """Change callbacks, run after commit in commit order, never two at once."""

    callbacks: list[Callback] = field(default_factory=list)
    pending: collections.deque[Change] = field(default_factory=collections.deque)
    busy: threading.Lock = field(default_factory=threading.Lock)
    errors: list[BaseException] = field(default_factory=list)

    def deliver(self) -> None:
        # Whoever holds `busy` drains for everyone; a write from inside a callback only queues.
        while self.pending and self.busy.acquire(blocking=False):
            try:
                while self.pending:
                    change = self.pending.popleft()
                    for callback in list(self.callbacks):
                        self._call(callback, change)
            finally:
                self.busy.release()

    def _call(self, callback: Callback, change: Change) -> None:
        try:
            callback(change.type, change.key, change.record.copy())
        except Exception as exc:
            # The write has committed; failing the writer (an HTTP client) would misreport it.
            self.errors.append(exc)


class ObjectStore:
    """Thread-safe object storage with the real API server's write semantics."""

    def __init__(self, registry: Registry | None = None, *, history: int = 10_000) -> None:
        self.registry = registry or Registry.with_builtins()
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._objects: dict[Key, dict[Key, Record]] = {}
        self._order: dict[Key, list[Key]] = {}
        self._rv = 0
        self._history: collections.deque[Change] = collections.deque(maxlen=history)
        self._floor = 0  # oldest resourceVersion a watch may still start from
        self._watchers: list[Watcher] = []
        self._subscribers = _Subscribers()
        namespaces = self.registry.lookup("namespaces")
        for name in INITIAL_NAMESPACES:
            self.insert(namespaces, "", {"metadata": {"name": name}})

    # ---- reads -------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._rv

    def read(self, rtype: ResourceType, namespace: str, name: str) -> Record:
        with self._lock:
            record = self._objects.get(rtype.storage, {}).get((namespace, name))
        if record is None:
            raise errors.not_found(rtype.plural, rtype.group, name)
        return record

    def query(self, rtype: ResourceType, namespace: str, query: ListQuery) -> ListPage:
        """One page of a LIST, in (namespace, name) order like etcd keys."""
        with self._lock:
            keys, bucket = self._sorted(rtype.storage), self._objects.get(rtype.storage, {})
            lo, hi = (0, len(keys)) if not namespace else _namespace_range(keys, namespace)
            rv = self._rv
            if query.continue_token:
                rv, after = _decode_continue(query.continue_token)
                lo = max(lo, bisect.bisect_right(keys, after))
            filtered = bool(query.labels or query.fields)
            page = ListPage([], rv)
            for index in range(lo, hi):
                record = bucket[keys[index]]
                if filtered and not _selected(query, record.obj):
                    continue
                page.items.append(record)
                if query.limit and len(page.items) == query.limit:
                    rest = (bucket[k].obj for k in keys[index + 1 : hi])
                    if any(_selected(query, obj) for obj in rest) if filtered else index + 1 < hi:
                        page.continue_token = _encode_continue(rv, keys[index])
                        # The real server counts what is left only for unfiltered lists.
                        page.remaining = None if filtered else hi - index - 1
                    break
            return page

    def _sorted(self, storage: Key) -> list[Key]:
        if storage not in self._order:
            self._order[storage] = sorted(self._objects.get(storage, {}))
        return self._order[storage]

    def namespace_exists(self, namespace: str) -> bool:
        with self._lock:
            return ("", namespace) in self._objects.get(_NAMESPACES, {})

    # ---- writes ------------------------------------------------------------------------

    def insert(
        self,
        rtype: ResourceType,
        namespace: str,
        body: Any,
        *,
        keep_status: bool = False,
        dry_run: bool = False,
    ) -> Record:
        """Create; `keep_status` lets tests seed status that an HTTP create would reset."""
        obj = objects.owned_copy(body)
        with self._lock:
            if rtype.namespaced and not self.namespace_exists(namespace):
                raise errors.not_found("namespaces", "", namespace)
            bucket = self._objects.get(rtype.storage, {})
            obj = objects.prepare_create(
                rtype, obj, namespace, lambda n: (namespace, n) in bucket, keep_status
            )
            name = obj["metadata"]["name"]
            if (namespace if rtype.namespaced else "", name) in bucket:
                raise errors.already_exists(rtype.plural, rtype.group, name)
            record = Record.of(obj) if dry_run else self._commit(rtype, ADDED, obj, None)
        self._subscribers.deliver()
        return record

    def replace(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        body: Any,
        *,
        status_only: bool = False,
        dry_run: bool = False,
    ) -> Record:
        """Update (PUT); a body without resourceVersion is an unconditional update."""
        return self.modify(
            rtype, namespace, name, lambda _: body, status_only=status_only, dry_run=dry_run
        )

    def modify(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        edit: Callable[[dict[str, Any]], Any],
        *,
        status_only: bool = False,
        dry_run: bool = False,
    ) -> Record:
        """Update with `edit(copy of current) -> new body`, atomically (PATCH uses this)."""
        with self._lock:
            old = self.read(rtype, namespace, name)
            body = objects.owned_copy(edit(old.copy()))
            new = objects.prepare_update(rtype, old.obj, body, name, status_only)
            if new is None or dry_run:
                return old if new is None else Record.of(new)
            record = self._commit(rtype, MODIFIED, new, old)
            if "deletionTimestamp" in new["metadata"] and not new["metadata"].get("finalizers"):
                self._drop(rtype, record)
        self._subscribers.deliver()
        return record

    def remove(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        *,
        preconditions: dict[str, Any] | None = None,
        dry_run: bool = False,
    ) -> tuple[Record, bool]:
        """Delete; returns the last revision and whether it is gone (finalizers may hold it)."""
        with self._lock:
            old = self.read(rtype, namespace, name)
            meta = old.obj["metadata"]
            for field_name in ("uid", "resourceVersion"):
                wanted = (preconditions or {}).get(field_name)
                if wanted and wanted != meta.get(field_name):
                    raise errors.conflict(rtype.plural, rtype.group, name)
            if dry_run:
                return old, True
            held = bool(meta.get("finalizers"))
            record = self._mark_deleting(rtype, old) if held else self._drop(rtype, old)
        self._subscribers.deliver()
        return record, not held

    def _mark_deleting(self, rtype: ResourceType, old: Record) -> Record:
        if "deletionTimestamp" in old.obj["metadata"]:
            return old
        obj = old.copy()
        obj["metadata"].update(deletionTimestamp=objects.now(), deletionGracePeriodSeconds=0)
        return self._commit(rtype, MODIFIED, obj, old)

    def _drop(self, rtype: ResourceType, old: Record) -> Record:
        """Remove an object and whatever a real server would remove with it."""
        name = old.obj["metadata"]["name"]
        if rtype.storage == _NAMESPACES:
            for other in self.registry.all():
                if other.namespaced:
                    self._drop_all(other, name)
        if rtype.storage == _CRDS:
            gone = self.registry.remove_crd(name)
            for crd_type in gone[:1]:
                self._drop_all(crd_type, None)
            for watcher in [w for w in self._watchers if w.rtype in gone]:
                watcher.close()
                self._watchers.remove(watcher)
        return self._commit(rtype, DELETED, old.copy(), old)

    def _drop_all(self, rtype: ResourceType, namespace: str | None) -> None:
        bucket = self._objects.get(rtype.storage, {})
        for key in [k for k in bucket if namespace is None or k[0] == namespace]:
            if key in bucket:  # another version of the same storage may have taken it already
                self._commit(rtype, DELETED, bucket[key].copy(), bucket[key])

    def _commit(
        self, rtype: ResourceType, kind: str, obj: dict[str, Any], old: Record | None
    ) -> Record:
        """Give `obj` the next resourceVersion, store it, and tell watchers and subscribers."""
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        record = Record.of(obj)
        bucket = self._objects.setdefault(rtype.storage, {})
        key = (str(obj["metadata"].get("namespace") or ""), str(obj["metadata"]["name"]))
        if kind == DELETED or key not in bucket:
            self._order.pop(rtype.storage, None)
        if kind == DELETED:
            del bucket[key]
        else:
            bucket[key] = record
        change = Change(kind, self._rv, rtype, record, old)
        if len(self._history) == self._history.maxlen:
            self._floor = self._history[0].rv
        self._history.append(change)
        for watcher in self._watchers:
            watcher.offer(change)
        if rtype.storage == _CRDS and kind != DELETED:
            self.registry.remove_crd(key[1])
            self.registry.add(types_from_crd(obj))
        self._subscribers.pending.append(change)
        self._changed.notify_all()
        return record

    # ---- watch -------------------------------------------------------------------------

    def watch(self, watcher: Watcher, since: str) -> Watcher:
        """Start `watcher` after resourceVersion `since`; "" or "0" first replays current state."""
        with self._lock:
            if since in ("", "0"):
                page = self.query(watcher.rtype, watcher.namespace, ListQuery())
                for record in page.items:
                    if watcher.matches(record.obj):
                        watcher.emit(Change(ADDED, 0, watcher.rtype, record, None), ADDED)
            elif not since.isdigit():
                raise errors.bad_request(f"invalid resource version: {since!r}")
            elif int(since) < self._floor:
                watcher.fail(errors.expired(since, self._floor + 1))
                return watcher
            else:
                for change in self._history:
                    if change.rv > int(since):
                        watcher.offer(change)
            self._watchers.append(watcher)
        return watcher

    def unwatch(self, watcher: Watcher) -> None:
        with self._lock:
            if watcher in self._watchers:
                self._watchers.remove(watcher)
            self._changed.notify_all()

    @property
    def watch_count(self) -> int:
        """Open watches (a test can check that a client hanging up releases its watch)."""
        with self._lock:
            return len(self._watchers)

    def close(self) -> None:
        """End every open watch (the server is stopping)."""
        with self._lock:
            for watcher in self._watchers:
                watcher.close()
            self._watchers.clear()

    def bookmark(self, rtype: ResourceType) -> bytes:
        meta = {"resourceVersion": str(self.resource_version)}
        body = {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta}
        return json.dumps({"type": "BOOKMARK", "object": body}).encode() + b"\n"

    # ---- reacting to changes -------------------------------------------------------------

    def subscribe(self, callback: Callback) -> Callable[[], None]:
        """Call `callback(event_type, key, object_copy)` after each committed change.

        Callbacks run on a writer's thread after its lock is released, in commit order and
        one at a time; a callback may write to the store (its change is delivered next).
        An exception in a callback is kept in `subscriber_errors`, not raised to the writer.
        Returns a function that unsubscribes.
        """
        self._subscribers.callbacks.append(callback)
        return lambda: self._subscribers.callbacks.remove(callback)

    @property
    def subscriber_errors(self) -> list[BaseException]:
        """Exceptions raised by subscribers (the `fake_apiserver` fixture fails on any)."""
        return list(self._subscribers.errors)

    def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Block until `predicate()` (checked after each change) holds, or time runs out."""
        with self._changed:
            return self._changed.wait_for(predicate, timeout)


def _selected(query: ListQuery, obj: dict[str, Any]) -> bool:
    return labels_match(query.labels, obj) and fields_match(query.fields, obj)


def _namespace_range(keys: list[Key], namespace: str) -> tuple[int, int]:
    return bisect.bisect_left(keys, (namespace, "")), bisect.bisect_left(
        keys, (namespace + "\0", "")
    )


def _encode_continue(rv: int, last: Key) -> str:
    token = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": list(last)})
    return base64.urlsafe_b64encode(token.encode()).decode()


def _decode_continue(token: str) -> tuple[int, Key]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        namespace, name = data["start"]
        return int(data["rv"]), (str(namespace), str(name))
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise errors.bad_request(f"continue key is not valid: {exc}") from exc
