"""`ApiStore`: a by-name API (`create`, `get`, `list`, `patch`, ...) over a real API server, with
`subscribe` fed by the server's own watches: what tests and the simulated node side write with.

Owns: the REST calls (admin bearer token, TLS verified against the plane's CA, a failure
raised as an `ApiError` of tests.kit.kube), names resolved through the server's discovery
(`tests.kit.plane.discovery`, refreshed when a CRD appears), `ObjectKey` (which object a
change is about), one list+watch thread per watched resource (`tests.kit.plane.watches`),
and the dispatcher that hands each change, in arrival order and one at a time, to the
subscribers (`ControlLoop`). `synced()` says whether every watched object's latest revision
has been delivered, which is what `settle()` needs on a server whose global resourceVersion
also counts leases and events. Must not know about GPUs or simulated controllers.
"""

from __future__ import annotations

import builtins
import contextlib
import http.client
import json
import queue
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

from tests.kit.kube import ApiError, errors
from tests.kit.kube.client import PATCH_TYPES
from tests.kit.plane import watches
from tests.kit.plane.discovery import Api, Discovery

Obj = dict[str, Any]


class ObjectKey(NamedTuple):
    """Which object a watch event is about (what subscribers are told)."""

    group: str
    version: str
    resource: str
    namespace: str
    name: str


Callback = Callable[[str, ObjectKey, Obj], None]
_GIVE_UP = object()


class ApiStore:
    """Objects by name on a real kube-apiserver: create, get, list, patch, delete, watch."""

    def __init__(
        self, url: str, token: str, ca: Path | None, thread_prefix: str = "apistore"
    ) -> None:
        """`thread_prefix` names its watch threads (a plane's own store lives as long as the
        plane, not a test)."""
        self.thread_prefix = thread_prefix
        parsed = urllib.parse.urlsplit(url)
        self.url = url
        self._host, self._port = parsed.hostname or "127.0.0.1", parsed.port or 443
        self._token = token
        # plain HTTP only for our stand-in server (its tests of this class)
        self._ssl = ssl.create_default_context(cafile=str(ca)) if ca else None
        self._local = threading.local()
        self._open: list[http.client.HTTPConnection] = []  # every thread's, closed by close()
        self._open_lock = threading.Lock()
        self.discovery = Discovery(lambda path: self.request("GET", path))
        self.stopping = False
        self._callbacks: list[Callback] = []
        self._errors: list[BaseException] = []
        self._watch_errors: list[tuple[str, BaseException]] = []
        self._watches: dict[str, watches.Watch] = {}
        self._events: queue.SimpleQueue[tuple[Api, str, Obj] | object] = queue.SimpleQueue()
        self._pending = 0
        self._changed = threading.Condition()
        self._rv = 0
        self._dispatcher: threading.Thread | None = None

    # ---- HTTP ---------------------------------------------------------------------------

    def connection(self, timeout: float = 30) -> http.client.HTTPConnection:
        if self._ssl is None:
            return http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        return http.client.HTTPSConnection(
            self._host, self._port, context=self._ssl, timeout=timeout
        )

    def headers(self, content_type: str = "") -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        """One call on this thread's keep-alive connection; a failure raises `ApiError`."""
        data = None if body is None else json.dumps(body).encode()
        for attempt in (1, 2):
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._local.conn = self.connection()
                with self._open_lock:
                    self._open.append(conn)
            try:
                conn.request(method, path, body=data, headers=self.headers(content_type))
                response = conn.getresponse()
                payload = response.read()
                break
            except (OSError, http.client.HTTPException):
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise
        if response.status >= 400:
            raise errors.from_response(response.status, payload)
        if not payload:
            return {}
        try:
            return json.loads(payload)
        except ValueError:
            return payload.decode(errors="replace")

    # ---- by name ----------------------------------------------------------------------------

    def create(self, obj: Obj, *, keep_status: bool = True) -> Obj:
        """Create `obj` (namespace from its metadata, else "default"); with `keep_status`, a
        status the server dropped on create is then written through the status subresource."""
        api = self.discovery.for_kind(str(obj.get("apiVersion")), str(obj.get("kind")))
        namespace = self._namespace(api, obj)
        created: Obj = self.request("POST", api.path(namespace), obj)
        status = obj.get("status")
        if keep_status and status and api.has_status and created.get("status") != status:
            name = created["metadata"]["name"]
            created = self.request(
                "PATCH", api.path(namespace, name, "status"), {"status": status},
                PATCH_TYPES["merge"],
            )  # fmt: skip
        return created

    def get(self, resource: str, name: str, namespace: str = "") -> Obj:
        api = self.discovery.lookup(resource)
        obj: Obj = self.request("GET", api.path(self._namespace(api, {}, namespace), name))
        return obj

    def list(
        self,
        resource: str,
        namespace: str = "",
        *,
        label_selector: str = "",
        field_selector: str = "",
    ) -> builtins.list[Obj]:
        api = self.discovery.lookup(resource)
        query = {k: v for k, v in (("labelSelector", label_selector),
                                   ("fieldSelector", field_selector)) if v}  # fmt: skip
        path = api.path(namespace if api.namespaced else "")
        if query:
            path += "?" + urllib.parse.urlencode(query)
        answer = self.request("GET", path)
        items: builtins.list[Obj] = answer.get("items") or []
        for item in items:  # a LIST's items carry no kind; callers read it
            item.setdefault("apiVersion", api.api_version)
            item.setdefault("kind", api.kind)
        return items

    def update(self, obj: Obj) -> Obj:
        api = self.discovery.for_kind(str(obj.get("apiVersion")), str(obj.get("kind")))
        path = api.path(self._namespace(api, obj), obj["metadata"]["name"])
        updated: Obj = self.request("PUT", path, obj)
        return updated

    def update_status(self, obj: Obj) -> Obj:
        api = self.discovery.for_kind(str(obj.get("apiVersion")), str(obj.get("kind")))
        sub = "status" if api.has_status else ""
        path = api.path(self._namespace(api, obj), obj["metadata"]["name"], sub)
        updated: Obj = self.request("PUT", path, obj)
        return updated

    def patch(
        self,
        resource: str,
        name: str,
        body: Any,
        *,
        namespace: str = "",
        patch_type: str = "merge",
        status: bool = False,
    ) -> Obj:
        api = self.discovery.lookup(resource)
        sub = "status" if status and api.has_status else ""
        path = api.path(self._namespace(api, {}, namespace), name, sub)
        patched: Obj = self.request("PATCH", path, body, PATCH_TYPES[patch_type])
        return patched

    def delete(self, resource: str, name: str, namespace: str = "") -> Obj:
        """Delete; returns the last revision the server answers (a Status for some types)."""
        api = self.discovery.lookup(resource)
        answer: Obj = self.request("DELETE", api.path(self._namespace(api, {}, namespace), name))
        return answer

    @staticmethod
    def _namespace(api: Api, obj: Obj, namespace: str = "") -> str:
        if not api.namespaced:
            return ""
        return namespace or str((obj.get("metadata") or {}).get("namespace") or "") or "default"

    # ---- the change feed ------------------------------------------------------------------

    def watch(self, resources: Iterable[str], timeout: float = 30.0) -> None:
        """Start list+watch threads for `resources` (those not served yet are skipped: call
        again once their CRD exists) and wait until each has listed once."""
        started = []
        for name in resources:
            try:
                api = self.discovery.lookup(name)
            except ApiError:
                continue
            if api.plural in self._watches:
                continue
            watch = self._watches[api.plural] = watches.Watch(self, api)
            self._ensure_dispatcher()
            watch.start()
            started.append(watch)
        deadline = time.monotonic() + timeout
        for watch in started:
            if not watch.ready.wait(max(0.0, deadline - time.monotonic())):
                raise TimeoutError(f"the first LIST of {watch.api.plural} took over {timeout} s")

    def watching(self, resource: str) -> bool:
        with contextlib.suppress(ApiError):
            return self.discovery.lookup(resource).plural in self._watches
        return False

    def subscribe(self, callback: Callback) -> Callable[[], None]:
        """Call `callback(event_type, key, object)` for each watched change, one at a time, on
        the dispatcher thread (a callback may write; its change arrives later, as a watch
        event). An exception is kept in `subscriber_errors`. Returns the unsubscriber."""
        self._callbacks.append(callback)
        self._ensure_dispatcher()
        return lambda: self._callbacks.remove(callback)

    def enqueue(self, api: Api, kind: str, obj: Obj) -> None:
        with self._changed:
            self._pending += 1
        self._events.put((api, kind, obj))

    def _ensure_dispatcher(self) -> None:
        if self._dispatcher is None:
            self._dispatcher = threading.Thread(
                target=self._dispatch, name=f"{self.thread_prefix}-dispatch", daemon=True
            )
            self._dispatcher.start()

    def _dispatch(self) -> None:
        while True:
            item = self._events.get()
            if item is _GIVE_UP:
                return
            assert isinstance(item, tuple)
            api, kind, obj = item
            meta = obj.get("metadata") or {}
            rv = str(meta.get("resourceVersion") or "0")
            with self._changed:
                self._rv = max(self._rv, int(rv) if rv.isdigit() else 0)
            key = ObjectKey(
                api.group, api.version, api.plural, str(meta.get("namespace") or ""),
                str(meta.get("name")),
            )  # fmt: skip
            for callback in list(self._callbacks):
                try:
                    callback(kind, key, json.loads(json.dumps(obj)))
                except Exception as exc:  # noqa: BLE001 - the feed must go on; the test fails
                    self._errors.append(exc)
            with self._changed:
                self._pending -= 1
                self._changed.notify_all()

    @property
    def resource_version(self) -> int:
        """The newest resourceVersion delivered to subscribers (not the server's global one,
        which leases and events move on without anyone here watching)."""
        with self._changed:
            return self._rv

    @property
    def subscriber_errors(self) -> builtins.list[BaseException]:
        return builtins.list(self._errors)

    @property
    def watch_errors(self) -> builtins.list[tuple[str, BaseException]]:
        return builtins.list(self._watch_errors)

    def note_watch_error(self, api: Api, exc: BaseException) -> None:
        self._watch_errors.append((api.plural, exc))

    def synced(self) -> bool:
        """Every watched object's newest revision (a fresh LIST) has reached the subscribers."""
        with self._changed:
            if self._pending:
                return False
        for watch in builtins.list(self._watches.values()):
            items = self.request("GET", watch.api.path()).get("items") or []
            current = {watches.key(o): str(o["metadata"].get("resourceVersion")) for o in items}
            if current != watch.seen:
                return False
        with self._changed:
            return not self._pending

    def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Block until `predicate()` holds (checked after each delivered change and at least
        every 0.2 s, since others write too), or time runs out."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.2))
            return True

    def close(self) -> None:
        self.stopping = True
        for watch in self._watches.values():
            watch.stop()
        for watch in self._watches.values():
            watch.thread.join(5)
        self._events.put(_GIVE_UP)
        if self._dispatcher is not None:
            self._dispatcher.join(5)
        with self._open_lock:
            for conn in self._open:
                conn.close()
            self._open.clear()
