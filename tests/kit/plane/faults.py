"""`FaultProxy`: a TLS proxy in front of the real kube-apiserver that injects, on demand, what
a real server does only under stress: a 429 or 503 with Retry-After, a connection that hangs,
an answer that drips, a body rewritten to hold an absurd value; or another client's write
landing on the real server just before a request (a race a test cannot time otherwise).

Every request it does not fault is forwarded unchanged to the real server, and the real answer
comes back byte for byte (headers and status included), so a client under test sees the real
server except for the one fault a test asked for. It serves with the API server's own
certificate (issued for 127.0.0.1), so clients verify TLS against the same CA.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import http.server
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.kit.plane.plane import ControlPlane
from tests.kit.plane.users import write_kubeconfig

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}


@dataclasses.dataclass
class Fault:
    """What to do to the next `times` requests whose method and path match."""

    method: str
    path: str  # a request matches when its path (without the query) contains this
    query: str = ""  # ... and its query contains this ("watch=true": only watches)
    status: int = 0  # answer with this status instead of forwarding
    retry_after: int | None = None
    hang: float = 0.0  # wait this long before doing anything
    drip: float = 0.0  # forward, then send the body one byte per `drip` seconds
    rewrite: Callable[[bytes], bytes] | None = None  # forward, then change the body
    before: Callable[[], None] | None = None  # run first: another client's write, say
    times: int = 1

    def matches(self, method: str, path: str) -> bool:
        where, _, query = path.partition("?")
        return (
            self.times > 0 and method == self.method and self.path in where and self.query in query
        )


@dataclasses.dataclass
class Seen:
    method: str
    path: str
    faulted: bool
    status: int = 0  # what the client was answered; 0 until then (or when it never was)
    client: int = 0  # the client's port: one per connection it opened


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up (a test's timeout) closes its end mid-answer: expected here."""


class FaultProxy:
    def __init__(self, upstream_port: int, cert: Path, key: Path, ca: Path) -> None:
        self.upstream_port = upstream_port
        self.ca = ca
        self.faults: list[Fault] = []
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's name
                pass

            def do_GET(self) -> None:  # noqa: N802 - stdlib's names
                proxy.handle(self)

            do_POST = do_PUT = do_PATCH = do_DELETE = do_GET  # noqa: N815

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server.server_address[1]}"

    @classmethod
    def in_front_of(cls, plane: ControlPlane) -> FaultProxy:
        creds = plane.creds
        assert creds is not None
        return cls(plane.port, creds.serving_cert, creds.serving_key, creds.ca_cert)

    def kubeconfig(self, path: Path, token: str) -> Path:
        """A kubeconfig that reaches the real server through this proxy as `token`'s user."""
        return write_kubeconfig(path, self.url, self.ca, {"token": token}, user="through-proxy")

    def clear(self) -> None:
        """Forget every fault not yet used and every request seen (a new test begins)."""
        with self._lock:
            self.faults.clear()
            self.seen.clear()

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self.faults.append(fault)
        return fault

    def _take(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.matches(method, path):
                    fault.times -= 1
                    return fault
        return None

    def handle(self, request: http.server.BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else b""
        fault = self._take(request.command, request.path)
        port = request.client_address[1]
        seen = Seen(request.command, request.path, fault is not None, client=port)
        with self._lock:
            self.seen.append(seen)
        if fault and fault.before:
            fault.before()
        if fault and fault.hang:
            time.sleep(fault.hang)
        if fault and fault.status:
            seen.status = fault.status
            self._refuse(request, fault)
            return
        status, headers, payload = self._forward(request, body)
        seen.status = status
        if fault and fault.rewrite:
            payload = fault.rewrite(payload)
        request.send_response(status)
        for name, value in headers:
            if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                request.send_header(name, value)
        request.send_header("Content-Length", str(len(payload)))
        request.end_headers()
        if fault and fault.drip:
            for byte in payload:
                request.wfile.write(bytes([byte]))
                request.wfile.flush()
                time.sleep(fault.drip)
        else:
            request.wfile.write(payload)

    def _refuse(self, request: http.server.BaseHTTPRequestHandler, fault: Fault) -> None:
        text = (
            '{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected by the '
            f'fault proxy","reason":"TooManyRequests","code":{fault.status}}}'
        ).encode()
        request.send_response(fault.status)
        request.send_header("Content-Type", "application/json")
        if fault.retry_after is not None:
            request.send_header("Retry-After", str(fault.retry_after))
        request.send_header("Content-Length", str(len(text)))
        request.end_headers()
        request.wfile.write(text)

    def _forward(
        self, request: http.server.BaseHTTPRequestHandler, body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        context = ssl.create_default_context(cafile=str(self.ca))
        upstream = http.client.HTTPSConnection(
            "127.0.0.1", self.upstream_port, context=context, timeout=30
        )
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        try:
            upstream.request(request.command, request.path, body=body or None, headers=headers)
            answer = upstream.getresponse()
            return answer.status, answer.getheaders(), answer.read()
        finally:
            upstream.close()


@contextlib.contextmanager
def in_front_of(plane: ControlPlane, kubeconfig: Path) -> Iterator[FaultProxy]:
    """A proxy before `plane`'s API server, with `kubeconfig` (a copy of the plane's, say)
    pointed at it while it runs: whoever uses that kubeconfig meets the faults added."""
    assert plane.creds is not None
    creds = plane.creds
    proxy = FaultProxy(plane.port, creds.serving_cert, creds.serving_key, creds.ca_cert).start()
    config = yaml.safe_load(kubeconfig.read_text())
    for entry in config["clusters"]:
        entry["cluster"]["server"] = proxy.url
    kubeconfig.write_text(yaml.safe_dump(config))
    try:
        yield proxy
    finally:
        proxy.stop()
