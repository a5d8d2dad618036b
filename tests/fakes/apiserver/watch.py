"""Watch streams: which changes a watcher sees, and pacing them out to one HTTP client.

Owns `Watcher` (a queue of encoded events filtered by namespace, label and field selectors,
turning a MODIFIED that enters or leaves the selection into ADDED or DELETED, as the real
watch cache does) and `pump` (the loop that writes events until the watch times out, the
client goes away or the server stops, with optional BOOKMARKs). Must not hold the store's
lock while writing to a socket: the store offers changes, the handler thread writes.
"""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.fakes.apiserver.errors import ApiError
from tests.fakes.apiserver.records import ADDED, DELETED, ERROR, MODIFIED, Change
from tests.fakes.apiserver.resources import ResourceType
from tests.fakes.apiserver.selectors import FieldTerm, Requirement, fields_match, labels_match

_POLL_S = 0.25  # how often an idle stream checks for a vanished client or a due bookmark
_BATCH = 2000  # events written per chunk when many are queued (initial ADDED bursts)


@dataclass(eq=False)
class Watcher:
    """One open watch; the store calls `offer` under its lock for every change."""

    rtype: ResourceType
    namespace: str = ""
    labels: tuple[Requirement, ...] = ()
    fields: tuple[FieldTerm, ...] = ()
    render: Callable[[Change, str], bytes] | None = None  # e.g. Table events for kubectl
    _queue: queue.SimpleQueue[bytes | None] = field(default_factory=queue.SimpleQueue)

    def matches(self, obj: dict[str, object]) -> bool:
        meta = obj["metadata"]
        assert isinstance(meta, dict)
        if self.namespace and meta.get("namespace") != self.namespace:
            return False
        return labels_match(self.labels, obj) and fields_match(self.fields, obj)

    def offer(self, change: Change) -> None:
        if change.rtype.storage != self.rtype.storage:
            return
        event = self._event_type(change)
        if event:
            self.emit(change, event)

    def emit(self, change: Change, event_type: str) -> None:
        self._queue.put(self.render(change, event_type) if self.render else change.line(event_type))

    def _event_type(self, change: Change) -> str | None:
        now = self.matches(change.record.obj)
        if change.type in (ADDED, DELETED):
            return change.type if now else None
        before = change.old is not None and self.matches(change.old.obj)
        if now:
            return MODIFIED if before else ADDED
        return DELETED if before else None

    def send(self, line: bytes) -> None:
        self._queue.put(line)

    def fail(self, error: ApiError) -> None:
        """End the stream with an ERROR event carrying a Status, as for an expired version."""
        self.send(json.dumps({"type": ERROR, "object": error.status()}).encode() + b"\n")
        self.close()

    def close(self) -> None:
        self._queue.put(None)

    def take(self, timeout: float) -> tuple[list[bytes], bool]:
        """Queued event lines (waiting up to `timeout` for the first) and whether it ended."""
        try:
            first = self._queue.get(timeout=timeout)
        except queue.Empty:
            return [], False
        if first is None:
            return [], True
        lines = [first]
        while len(lines) < _BATCH:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                return lines, True
            lines.append(item)
        return lines, False


@dataclass(frozen=True)
class Pacing:
    """How long a stream lives and how it keeps the client informed while idle."""

    timeout_s: float | None = None
    bookmark_every_s: float | None = None  # None unless the client asked for bookmarks


def pump(
    watcher: Watcher,
    write: Callable[[bytes], None],
    pacing: Pacing,
    bookmark: Callable[[], bytes],
    client_gone: Callable[[], bool],
) -> None:
    """Write events until timeout, end of stream or a vanished client; never raises OSError."""
    start = time.monotonic()
    deadline = start + pacing.timeout_s if pacing.timeout_s else float("inf")
    next_bookmark = start + (pacing.bookmark_every_s or float("inf"))
    try:
        while (left := deadline - time.monotonic()) > 0:
            lines, ended = watcher.take(min(left, _POLL_S))
            if lines:
                write(b"".join(lines))
            if ended:
                return
            if not lines and client_gone():
                return
            if time.monotonic() >= next_bookmark:
                write(bookmark())
                next_bookmark = time.monotonic() + (pacing.bookmark_every_s or float("inf"))
    except OSError:
        return  # the client hung up mid-write; nothing to report to anyone
