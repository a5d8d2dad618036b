"""The usage endpoint treats every request as hostile: only GET of its few paths, no body,
bounded request line, headers, connections and rate; a client that drips bytes is cut.
All traffic goes to 127.0.0.1."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from kubectl_gpu.agent import usageserver
from tests.agent.usagenode import UsageNode


def exchange(server: usageserver.UsageServer, raw: bytes, timeout: float = 5.0) -> bytes:
    with socket.create_connection(server.server_address[:2], timeout=timeout) as conn:
        conn.sendall(raw)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
        return answer


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"])
def test_anything_but_a_read_is_refused_405(served: usageserver.UsageServer, method: str) -> None:
    answer = exchange(served, f"{method} /v1/usage HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert status_of(answer) == 405 and b"Allow: GET, HEAD" in answer


@pytest.mark.parametrize(
    "path",
    ["/", "/v1", "/v1/usage/../../etc/passwd", "/proc/1/environ", "/v2/usage", "/v1/usage/x"],
)
def test_unknown_paths_are_404_and_name_no_file(served: usageserver.UsageServer, path: str) -> None:
    answer = exchange(served, f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert status_of(answer) == 404 and b"root:" not in answer


def test_a_request_body_is_refused(served: usageserver.UsageServer) -> None:
    raw = b"GET /v1/usage HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
    assert status_of(exchange(served, raw)) == 413


def test_an_oversized_request_line_is_refused(served: usageserver.UsageServer) -> None:
    raw = b"GET /v1/usage?" + b"a" * 100_000 + b" HTTP/1.1\r\n\r\n"
    assert status_of(exchange(served, raw)) == 414


@pytest.mark.parametrize(
    "head",
    [b"X-Long: " + b"a" * 10_000 + b"\r\n", b"".join(b"X-%d: 1\r\n" % i for i in range(100))],
)
def test_oversized_or_too_many_headers_are_refused(
    served: usageserver.UsageServer, head: bytes
) -> None:
    raw = b"GET /v1/usage HTTP/1.1\r\nHost: x\r\n" + head + b"\r\n"
    assert status_of(exchange(served, raw)) == 431


def test_garbage_is_a_400_and_the_endpoint_keeps_serving(served: usageserver.UsageServer) -> None:
    assert status_of(exchange(served, b"\x00\xff\xfe garbage\r\n\r\n")) == 400
    assert status_of(exchange(served, b"GET /healthz HTTP/1.1\r\n\r\n")) == 200


def test_a_client_that_drips_is_cut_and_does_not_hold_a_slot(
    served: usageserver.UsageServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(usageserver._Handler, "timeout", 0.5)
    with socket.create_connection(served.server_address[:2], timeout=5) as slow:
        slow.sendall(b"GET /v1/us")
        started = time.monotonic()
        assert slow.recv(100) == b""  # the server closed it
        assert time.monotonic() - started < 3
    assert status_of(exchange(served, b"GET /healthz HTTP/1.1\r\n\r\n")) == 200


def test_many_connections_are_answered_503_beyond_the_bound(
    served: usageserver.UsageServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(usageserver._Handler, "timeout", 3.0)
    idle = [
        socket.create_connection(served.server_address[:2], timeout=5)
        for _ in range(usageserver.MAX_CONNECTIONS)
    ]
    try:
        time.sleep(0.3)  # each holds a slot, sending nothing
        answer = exchange(served, b"GET /healthz HTTP/1.1\r\n\r\n")
        assert status_of(answer) == 503
    finally:
        for conn in idle:
            conn.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if status_of(exchange(served, b"GET /healthz HTTP/1.1\r\n\r\n")) == 200:
            return
        time.sleep(0.1)
    pytest.fail("the endpoint did not serve again after the connections closed")


def test_a_flood_is_rate_limited_429(usage_node: UsageNode) -> None:
    server = usageserver.UsageServer(("127.0.0.1", 0), usage_node.reader(), rate=1.0, burst=3)
    server.serve_in_background()
    try:
        codes = [status_of(exchange(server, b"GET /healthz HTTP/1.1\r\n\r\n")) for _ in range(8)]
    finally:
        server.shutdown()
        server.server_close()
    assert codes[:3] == [200, 200, 200] and 429 in codes[3:]


def test_concurrent_reads_cost_nvml_one_reading(
    usage_node: UsageNode, served: usageserver.UsageServer
) -> None:
    before = len([c for c in usage_node.lib.calls if c == "nvmlDeviceGetCount_v2"])
    threads = [
        threading.Thread(target=exchange, args=(served, b"GET /v1/usage HTTP/1.1\r\n\r\n"))
        for _ in range(5)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    inits = len([c for c in usage_node.lib.calls if c == "nvmlDeviceGetCount_v2"]) - before
    assert inits == 1
