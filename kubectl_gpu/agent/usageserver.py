"""The agent's read-only HTTP endpoint for `kubectl gpu top` (`--usage-port`, default 9402).

`kubectl gpu top` reaches it through the API server's pod proxy
(`pods/<agent pod>:9402/proxy/v1/usage`), so the user needs `get pods/proxy` and nothing
reaches the agent that RBAC did not let through; the endpoint still treats every request as
hostile. It answers only `GET` (and `HEAD`) of a fixed set of paths:

- `/v1/usage`: the node's GPUs, MIG devices and compute processes with their pods now
  (`usage.document`, docs/top.md);
- `/v1/idle`: the ring of samples behind `top --idle` (`usage.samples`);
- `/healthz`: `ok`.

Bounds: a request line of at most `MAX_REQUEST_LINE` bytes and `MAX_HEADERS` headers of
at most `MAX_HEADER_LINE` bytes each, no body, `CONNECTION_TIMEOUT` seconds per connection
(a client that drips bytes is cut), at most `MAX_CONNECTIONS` connections served at once
(more are answered 503 at once), and `RATE` requests per second with bursts of `BURST`
(429 beyond). At rest it sends nothing and reads nothing: NVML is read when asked, at most
once per `usagereading.FRESH` seconds. Never exposes a command line, an environment or a
file: what it serves is built from typed readings, not from anything a request names.
Owns the HTTP layer only; the reading is `usagereading`'s.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import http.server
import io
import json
import logging
import socket
import threading
import time
from typing import Any

from kubectl_gpu.agent.usagereading import Sampler, UsageReader
from kubectl_gpu.gpumap.report import timestamp
from kubectl_gpu.usage import samples

log = logging.getLogger(__name__)

DEFAULT_PORT = 9402
PORT_NAME = "usage"
MAX_REQUEST_LINE = 1024
MAX_HEADER_LINE = 4096
MAX_HEADERS = 32
MAX_CONNECTIONS = 8
CONNECTION_TIMEOUT = 5.0
RATE, BURST = 5.0, 20  # requests per second, and how many may come at once
PATHS = ("/v1/usage", "/v1/idle", "/healthz")


class _Bucket:
    """A token bucket: RATE requests a second on average, BURST at once."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, burst
        self.tokens, self.at = float(burst), time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
            self.at = now
            if self.tokens < 1:
                return False
            self.tokens -= 1
            return True


class UsageServer(http.server.ThreadingHTTPServer):
    """The endpoint; `serve_in_background` starts it, `shutdown` + `server_close` end it."""

    daemon_threads = True
    request_queue_size = 16

    def __init__(
        self,
        address: tuple[str, int],
        reader: UsageReader,
        sampler: Sampler | None = None,
        rate: float = RATE,
        burst: int = BURST,
    ) -> None:
        self.reader, self.sampler = reader, sampler
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.bucket = _Bucket(rate, burst)
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        """A thread per connection, at most MAX_CONNECTIONS; one more is told 503 and closed."""
        if not self.slots.acquire(blocking=False):
            _refuse(request, 503, "busy: too many connections")
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:  # noqa: D102
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def serve_in_background(self) -> threading.Thread:
        """Serve on a daemon thread (the agent's loop keeps the main one)."""
        thread = threading.Thread(target=self.serve_forever, name="usage-server", daemon=True)
        thread.start()
        return thread


def _refuse(request: Any, status: int, text: str) -> None:
    body = json.dumps({"error": text}).encode()
    head = (
        f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\nContent-Type: application/json"
        f"\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with contextlib.suppress(OSError):
        request.settimeout(1.0)
        request.sendall(head.encode() + body)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: UsageServer
    timeout = CONNECTION_TIMEOUT
    protocol_version = "HTTP/1.1"
    server_version = "kubectl-gpu-agent"
    sys_version = ""
    default_request_version = "HTTP/1.1"  # an error to garbage still gets a status line

    def handle(self) -> None:
        """One request per connection (no keep-alive: nothing lingers between reads)."""
        with contextlib.suppress(OSError, socket.timeout):
            self.handle_one_request()

    def handle_one_request(self) -> None:  # noqa: D102 - the stdlib's, with our bounds
        line = self.rfile.readline(MAX_REQUEST_LINE + 1)
        if not line:
            self.close_connection = True
            return
        if len(line) > MAX_REQUEST_LINE:
            self.requestline, self.request_version, self.command = "", "HTTP/1.1", ""
            self._answer(414, {"error": f"request line longer than {MAX_REQUEST_LINE} bytes"})
            return
        self.raw_requestline = line
        if not self._read_request():
            return
        if not self.server.bucket.take():
            self._answer(429, {"error": f"more than {RATE:g} requests a second"}, retry=1)
            return
        self._route()

    def _read_request(self) -> bool:
        """The headers read within our bounds, then parsed by the stdlib from that copy;
        False when an answer was already sent."""
        head = []
        for _ in range(MAX_HEADERS + 1):
            line = self.rfile.readline(MAX_HEADER_LINE + 1)
            if len(line) > MAX_HEADER_LINE:
                return self._too_large(f"a header line is longer than {MAX_HEADER_LINE} bytes")
            head.append(line)
            if line in (b"\r\n", b"\n", b""):
                break
        else:
            return self._too_large(f"more than {MAX_HEADERS} headers")
        self.rfile = io.BytesIO(b"".join(head))
        if not self.parse_request():  # it has answered 400 itself
            return False
        self.close_connection = True
        length = self.headers.get("Content-Length")
        if (length not in (None, "0")) or self.headers.get("Transfer-Encoding"):
            self._answer(413, {"error": "this endpoint takes no request body"})
            return False
        return True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The stdlib's errors (bad request line, version) as our JSON, input never echoed."""
        self.close_connection = True
        self._answer(code, {"error": http.HTTPStatus(code).phrase})

    def _too_large(self, why: str) -> bool:
        self.requestline, self.request_version, self.command = "", "HTTP/1.1", ""
        self._answer(431, {"error": why})
        return False

    def _route(self) -> None:
        if self.command not in ("GET", "HEAD"):
            self._answer(405, {"error": f"{self.command} is not allowed: read-only"},
                         allow="GET, HEAD")  # fmt: skip
            return
        path = self.path.split("?", 1)[0]
        if path == "/v1/usage":
            self._answer(200, self.server.reader.read().to_dict())
        elif path == "/v1/idle":
            self._answer(200, self._idle())
        elif path == "/healthz":
            self._answer(200, {"status": "ok"})
        else:
            self._answer(404, {"error": "not found", "paths": list(PATHS)})

    def _idle(self) -> dict[str, Any]:
        reader, sampler = self.server.reader, self.server.sampler
        read_at = timestamp(dt.datetime.fromtimestamp(reader.clock(), dt.timezone.utc))
        node = reader.sources.kubelet.node
        if sampler is None:
            return samples.to_dict(node, read_at, 0, samples.Ring(1))
        with sampler.lock:
            return samples.to_dict(node, read_at, sampler.interval, sampler.ring)

    def _answer(self, status: int, document: Any, allow: str = "", retry: int = 0) -> None:
        body = json.dumps(document, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        if allow:
            self.send_header("Allow", allow)
        if retry:
            self.send_header("Retry-After", str(retry))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's name
        log.debug("usage endpoint: %s", format % args)
