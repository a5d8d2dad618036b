"""The HTTP/1.1 side of the stand-in: a threaded server on 127.0.0.1 and its kubeconfig.

Owns `FakeApiServer` (start/stop, open-connection tracking so that stop really closes
keep-alive and watch connections, the request log, the optional 403 rules), the request
handler (body limits, Status errors, chunked watch streams) and `write_kubeconfig`.
Run `python -m tests.fakes.apiserver --kubeconfig PATH` for a demo server.
Must not decide API semantics: routes and the store do.
"""

from __future__ import annotations

import collections
import select
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import yaml

from tests.fakes.apiserver import errors, eviction, podlogs
from tests.fakes.apiserver.routes import Reply, Request, Router, discovery_reply, resolve
from tests.fakes.apiserver.seeding import Store
from tests.fakes.apiserver.watch import pump

MAX_BODY = 64 * 1024 * 1024


@dataclass(frozen=True)
class LoggedRequest:
    method: str
    path: str
    query: str
    content_type: str
    code: int
    user_agent: str = ""


@dataclass(frozen=True)
class Denial:
    """A (verb, resource) pair answered with 403, optionally only in one namespace."""

    verb: str
    resource: str
    group: str = ""
    namespace: str | None = None

    def covers(self, access: dict[str, str]) -> bool:
        return (
            self.verb in (access["verb"], "*")
            and self.resource == access["resource"]
            and self.group == access["group"]
            and self.namespace in (None, access["namespace"])
        )


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # idle keep-alive threads must not hold up stop(); we close them
    app: FakeApiServer

    def process_request(self, request: Any, client_address: Any) -> None:
        self.app.track(request, True)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        self.app.track(request, False)
        super().shutdown_request(request)


class FakeApiServer:
    """A Kubernetes API server stand-in on 127.0.0.1; use as a context manager or start/stop."""

    def __init__(self, store: Store | None = None, *, user: str = "test-user") -> None:
        self.store = store or Store()
        self.user = user  # the name 403 messages give, whatever bearer token was sent
        self.router = Router(self.store)
        self.logs = podlogs.LogStore()  # container logs, served by `pods/log`
        self.denials: list[Denial] = []
        self.requests: collections.deque[LoggedRequest] = collections.deque(maxlen=10_000)
        self.max_body = MAX_BODY
        self._httpd = _HttpServer(("127.0.0.1", 0), _Handler)
        self._httpd.app = self
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"{host!s}:{port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def start(self) -> FakeApiServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """End watches, stop accepting, close every open connection, free the port."""
        self.store.close()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            for connection in list(self._connections):
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # already closed by the client
        self._httpd.server_close()

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def track(self, connection: socket.socket, is_open: bool) -> None:
        with self._lock:
            (self._connections.add if is_open else self._connections.discard)(connection)

    def deny(self, verb: str, resource: str, group: str = "", namespace: str | None = None) -> None:
        """Answer 403 Forbidden to `verb` on `resource` (e.g. "nodes/status"), RBAC-style."""
        self.denials.append(Denial(verb, resource, group, namespace))

    def check_access(self, access: dict[str, str]) -> None:
        if any(d.covers(access) for d in self.denials):
            raise errors.forbidden(access, self.user)

    def write_kubeconfig(self, path: Path, *, namespace: str = "default") -> Path:
        return write_kubeconfig(self.url, path, namespace=namespace)


def write_kubeconfig(url: str, path: Path, *, namespace: str = "default") -> Path:
    """A kubeconfig whose only context points at `url` with a bearer token."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "users": [{"name": "fake-user", "user": {"token": "fake-token"}}],
        "contexts": [
            {
                "name": "fake",
                "context": {"cluster": "fake", "user": "fake-user", "namespace": namespace},
            }
        ],
        "current-context": "fake",
        "preferences": {},
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _logs(app: FakeApiServer, request: Request, parts: list[str]) -> Reply:
    """GET pods/NAME/log: RBAC's `get` on `pods/log`, answered as text/plain."""
    if request.method != "GET":
        raise errors.method_not_allowed()
    access = dict(verb="get", resource="pods/log", group="", namespace=parts[3], name=parts[5])
    app.check_access(access)
    return Reply(200, podlogs.read(app.store, app.logs, parts, request.query), "text/plain")


def _evict(app: FakeApiServer, request: Request, parts: list[str]) -> Reply:
    """POST pods/NAME/eviction: RBAC's `create` on `pods/eviction`, PDBs honoured."""
    if request.method != "POST":
        raise errors.method_not_allowed()
    access = dict(verb="create", resource="pods/eviction", group="", namespace=parts[3],
                  name=parts[5])  # fmt: skip
    app.check_access(access)
    return Reply(201, eviction.evict(app.store, parts, request.body))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Buffered writes put headers and body in one segment; unbuffered, Nagle's algorithm and
    # the client's delayed ACK cost 40 ms per request. handle_one_request flushes each reply.
    wbufsize = 64 * 1024
    server: _HttpServer

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def __getattr__(self, name: str) -> Any:
        # Every method (GET … DELETE, and any other verb) goes to one dispatcher, so unknown
        # verbs get a Status 405 instead of http.server's HTML 501.
        if name.startswith("do_"):
            return self._serve
        raise AttributeError(name)

    def log_message(self, format: str, *args: Any) -> None:
        return  # keep pytest output clean; the server keeps its own request log

    def _serve(self) -> None:
        app = self.server.app
        url = urlsplit(self.path)
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        try:
            query = dict(parse_qsl(url.query, keep_blank_values=True))
            accept = self.headers.get("Accept") or "application/json"
            request = Request(self.command, url.path, query, content_type, self._body(), accept)
            reply = self._dispatch(app, request)
        except errors.ApiError as exc:
            reply = Reply(exc.code, exc.body())
        except Exception as exc:  # a stand-in bug must reach the test as a 500, not a hang
            reply = Reply(500, errors.ApiError(500, "InternalError", repr(exc)).body())
        app.requests.append(
            LoggedRequest(
                self.command,
                url.path,
                url.query,
                content_type,
                reply.code,
                self.headers.get("User-Agent") or "",
            )  # fmt: skip
        )
        if reply.watcher is not None:
            self._stream(app, reply)
        else:
            self._send(reply)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length > self.server.app.max_body:
            self.close_connection = True  # the unread body makes this connection unusable
            raise errors.too_large(self.server.app.max_body)
        return self.rfile.read(length) if length else b""

    def _dispatch(self, app: FakeApiServer, request: Request) -> Reply:
        parts = [unquote(p) for p in request.path.split("/") if p]
        if not parts:
            raise errors.path_not_found()
        if parts == ["openapi", "v2"]:
            # An empty protobuf message is a valid, empty openapi_v2.Document: kubectl (1.20
            # asks only for protobuf here) then finds no schema and skips client validation.
            return Reply(200, b"", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
        reply = discovery_reply(app.store, parts, app.address)
        if reply is not None:
            if request.method != "GET":
                raise errors.method_not_allowed()
            return reply
        if podlogs.is_log_path(parts):
            return _logs(app, request, parts)
        if eviction.is_eviction_path(parts):
            return _evict(app, request, parts)
        target = resolve(app.store, parts)
        verb = target.verb(request.method, request.query)
        if not verb:
            raise errors.method_not_allowed()
        app.check_access(target.access(verb))
        return app.router.handle(target, verb, request)

    def _send(self, reply: Reply) -> None:
        self.send_response(reply.code)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)

    def _stream(self, app: FakeApiServer, reply: Reply) -> None:
        watcher, pacing = reply.watcher, reply.pacing
        assert watcher is not None and pacing is not None
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()  # the client waits for the headers before any event arrives
        self.close_connection = True
        try:
            pump(
                watcher, self._chunk, pacing, lambda: app.store.bookmark(watcher.rtype), self._gone
            )
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            pass  # the client went away first
        finally:
            app.store.unwatch(watcher)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _gone(self) -> bool:
        """Whether the client closed its end (a readable socket with nothing to read)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True
