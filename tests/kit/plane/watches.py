"""One resource's list+watch thread, as `ApiStore.watch` runs it against the real server:
it lists, then watches from the list's resourceVersion with bookmarks, resumes from the last
resourceVersion it saw when the server ends a watch, relists on 410 Gone (delivering what
vanished meanwhile as DELETED), and hands each change to its store in arrival order. Must not
call subscribers itself (the store's dispatcher does)."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
import urllib.parse
from typing import Any, Protocol

from tests.kit.kube import errors
from tests.kit.plane.discovery import Api

Obj = dict[str, Any]
_WATCH_TIMEOUT_S = 240  # the server ends a watch after this; the thread resumes it


class WatchSource(Protocol):
    """What a watch needs of its store (`ApiStore`)."""

    stopping: bool
    thread_prefix: str  # names the watch threads

    def request(self, method: str, path: str) -> Any: ...

    def connection(self, timeout: float = 30) -> http.client.HTTPConnection: ...

    def headers(self, content_type: str = "") -> dict[str, str]: ...

    def enqueue(self, api: Api, kind: str, obj: Obj) -> None: ...

    def note_watch_error(self, api: Api, exc: BaseException) -> None: ...


class Watch:
    """One resource's list+watch thread."""

    def __init__(self, store: WatchSource, api: Api) -> None:
        self.store = store
        self.api = api
        self.rv = ""
        self.seen: dict[tuple[str, str], str] = {}  # (namespace, name) -> resourceVersion
        self.ready = threading.Event()
        self._conn: http.client.HTTPConnection | None = None
        self.thread = threading.Thread(
            target=self._run, name=f"{store.thread_prefix}-watch-{api.plural}", daemon=True
        )

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        conn = self._conn
        if conn is not None and conn.sock is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)

    def _run(self) -> None:
        while not self.store.stopping:
            try:
                if not self.rv:
                    self._relist()
                self._watch()
            except Exception as exc:  # noqa: BLE001 - retried; kept for the test to see
                if self.store.stopping:
                    return
                self.store.note_watch_error(self.api, exc)
                time.sleep(0.5)

    def _relist(self) -> None:
        answer = self.store.request("GET", self.api.path())
        items = answer.get("items") or []
        current = {key(o): o for o in items}
        # what vanished while we were not watching is a DELETED, the rest ADDED or MODIFIED
        for namespace, name in [k for k in self.seen if k not in current]:
            gone = {"metadata": {"namespace": namespace, "name": name}}
            self._deliver("DELETED", gone)
        for obj in items:
            obj.setdefault("apiVersion", self.api.api_version)
            obj.setdefault("kind", self.api.kind)
            rv = str(obj["metadata"].get("resourceVersion"))
            if self.seen.get(key(obj)) != rv:
                self._deliver("MODIFIED" if key(obj) in self.seen else "ADDED", obj)
        self.rv = str(answer["metadata"]["resourceVersion"])
        self.ready.set()

    def _watch(self) -> None:
        query = urllib.parse.urlencode(
            {
                "watch": "1",
                "resourceVersion": self.rv,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": str(_WATCH_TIMEOUT_S),
            }
        )
        conn = self.store.connection(timeout=_WATCH_TIMEOUT_S + 30)
        self._conn = conn
        try:
            conn.request("GET", f"{self.api.path()}?{query}", headers=self.store.headers())
            response = conn.getresponse()
            if response.status != 200:
                body = response.read()
                error = errors.from_response(response.status, body)
                if error.code == 410:
                    self.rv = ""
                    return
                raise error
            while not self.store.stopping:
                line = response.readline()
                if not line:
                    return  # the server ended the watch; resume from self.rv
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        self.rv = ""
                        return
                    raise errors.from_response(
                        int(obj.get("code") or 500), json.dumps(obj).encode()
                    )
                rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
                if kind != "BOOKMARK":
                    self._deliver(str(kind), obj)
                if rv:
                    self.rv = rv
        finally:
            self._conn = None
            conn.close()

    def _deliver(self, kind: str, obj: Obj) -> None:
        which = key(obj)
        if kind == "DELETED":
            self.seen.pop(which, None)
        else:
            self.seen[which] = str(obj["metadata"].get("resourceVersion"))
        self.store.enqueue(self.api, kind, obj)


def key(obj: Obj) -> tuple[str, str]:
    """(namespace, name) of an object."""
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name"))
