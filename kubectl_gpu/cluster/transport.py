"""The wire under `Api`: one raw HTTP exchange with deadlines, on either client version.

Owns the request policy's figures, the connection class whose wait for a status line ends at
the request's deadline, reading an answer's body in bounded chunks, and the one call into the
kubernetes client's `param_serialize`/`call_api` (its >= 37 and its 30-36 signatures), used by
a request and a watch alike. Must not decide about retries or errors (that is `api.py`).
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

# The request policy, one for every command and the agent. A server that accepts no
# connection within CONNECT_TIMEOUT, or sends nothing for READ_TIMEOUT while answering, is
# given up on (before: about 61 s per command against a hung server); one that keeps sending
# a byte now and then (headers or body) is given up on when its answer has taken
# ANSWER_DEADLINE, and one whose answer grows past MAX_ANSWER_BYTES (a list page of unbounded
# size) is refused, not held in memory. Reads (GET) are tried once more after a refused or
# reset connection, a connect timeout or a 429/502/503/504 answer, RETRY_PAUSE later (or the
# server's Retry-After, at most MAX_RETRY_PAUSE); a read timeout or a passed deadline is not
# retried (a hung server stays hung) and neither is a write (it may have been applied),
# except after a 429: flow control turned it away before it ran, so any request is sent again
# after the server's Retry-After, up to api.MAX_THROTTLED times.
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 20.0
ANSWER_DEADLINE = 60.0
MAX_ANSWER_BYTES = 256 * 1024 * 1024
RETRY_PAUSE = 0.5
MAX_RETRY_PAUSE = 2.0
_CHUNK = 64 * 1024
RETRY_STATUSES = frozenset({429, 502, 503, 504})
# A watch hears at least a bookmark about every minute from kube-apiserver; this much
# silence means the connection is gone without a FIN (a NAT or load balancer dropped it).
WATCH_IDLE = 150.0


@dataclasses.dataclass(frozen=True)
class Answer:
    """One HTTP answer, read whole."""

    status: int
    reason: str
    headers: Any
    data: bytes


class TooSlow(Exception):
    """The answer did not finish within the request's deadline."""


class TooLarge(Exception):
    """The answer grew past the size a request may hold in memory."""


def read_body(raw: Any, deadline: float, limit: int) -> bytes:
    """The answer's body, read a chunk at a time: `read1` returns what has arrived, so the
    deadline is checked between chunks however slowly the bytes come."""
    read = raw.read1 if hasattr(raw, "read1") else raw.read  # urllib3 < 2.3 has no read1
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = read(_CHUNK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise TooLarge(size)
        chunks.append(chunk)
        if time.monotonic() > deadline:
            raise TooSlow(size)


@dataclasses.dataclass
class Deadline:
    """One request's deadline (time.monotonic), and whether the connection was cut at it."""

    at: float
    expired: bool = False


class _Watching(threading.local):
    current: Deadline | None = None


WATCHING = _Watching()  # the request this thread is sending now


def _cut(sock: socket.socket, watch: Deadline) -> None:
    watch.expired = True
    try:
        sock.shutdown(socket.SHUT_RDWR)  # the blocked read returns: the request fails now
    except OSError:
        pass


class _Cutter:
    """One thread for every request's deadline, started with the first request: at a watched
    request's deadline it cuts that connection. (A timer thread per request cost a thread
    start for each: 2,000 in a 1,000-node `share`, on the cores the cluster runs on.)"""

    def __init__(self) -> None:
        self._start()

    def _start(self) -> None:
        self._lock = threading.Condition()
        self._armed: dict[int, tuple[socket.socket, Deadline]] = {}
        self._due: list[tuple[float, int]] = []  # (deadline, key), a heap; disarmed ones linger
        self._keys = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, sock: socket.socket, watch: Deadline) -> int:
        with self._lock:
            key = next(self._keys)
            self._armed[key] = (sock, watch)
            heapq.heappush(self._due, (watch.at, key))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="kubectl-gpu-deadlines", daemon=True
                )
                self._thread.start()
            self._lock.notify()
            return key

    def disarm(self, key: int) -> None:
        with self._lock:
            self._armed.pop(key, None)

    def forget_parent(self) -> None:
        """In a forked child the thread is gone and none of the parent's requests is the
        child's to cut (their sockets are shared with the parent): start empty."""
        self._start()

    def _run(self) -> None:
        with self._lock:
            while True:
                while self._due and self._due[0][1] not in self._armed:
                    heapq.heappop(self._due)
                if not self._due:
                    self._lock.wait()
                    continue
                at, key = self._due[0]
                left = at - time.monotonic()
                if left > 0:
                    self._lock.wait(left)
                    continue
                heapq.heappop(self._due)
                _cut(*self._armed.pop(key))


_CUTTER = _Cutter()
os.register_at_fork(after_in_child=_CUTTER.forget_parent)


def _watched(base: Any) -> Any:
    """`base` (urllib3's connection class) whose wait for the status line and headers ends at
    the request's deadline: the socket's read timeout alone lets a server that sends a byte
    now and then hold a command for ever."""

    class Watched(base):  # type: ignore[misc]
        def getresponse(self, *args: Any, **kwargs: Any) -> Any:
            watch = WATCHING.current
            if watch is None or self.sock is None:
                return super().getresponse(*args, **kwargs)
            key = _CUTTER.arm(self.sock, watch)
            try:
                return super().getresponse(*args, **kwargs)
            finally:
                _CUTTER.disarm(key)

    return Watched


def watch_pools(pool_manager: Any) -> None:
    """Make every connection the client opens a watched one."""
    import urllib3

    classes = {}
    for scheme, pool in (
        ("http", urllib3.HTTPConnectionPool),
        ("https", urllib3.HTTPSConnectionPool),
    ):
        classes[scheme] = type(
            pool.__name__, (pool,), {"ConnectionCls": _watched(pool.ConnectionCls)}
        )
    pool_manager.pool_classes_by_scheme = classes


def raw_response(  # noqa: PLR0913 - one request's parts, keyword-only
    client: Any,
    method: str,
    url: str,
    *,
    headers: dict[str, str],
    query: Mapping[str, str] | None,
    body: Any,
    timeouts: tuple[float, float],
) -> Any:
    """Send one request; return urllib3's response with its body unread (a request reads it
    whole, a watch as events come)."""
    params = list(query.items()) if query else None
    if hasattr(client, "param_serialize"):  # kubernetes >= 37
        request = client.param_serialize(
            method, url, query_params=params, header_params=headers, body=body,
            auth_settings=["BearerToken"],
        )  # fmt: skip
        return client.call_api(*request, _request_timeout=timeouts).response
    # kubernetes 30-36 (what the krew archive vendors): raw urllib3 response
    return client.call_api(
        url, method, query_params=params, header_params=headers, body=body,
        auth_settings=["BearerToken"], _preload_content=False,
        _return_http_data_only=True, _request_timeout=timeouts,
    )  # fmt: skip
