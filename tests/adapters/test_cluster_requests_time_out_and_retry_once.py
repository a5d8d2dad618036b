"""Every API request has a connect and a read timeout and one retry policy: a read (GET) is
tried once more after a dropped connection or a 503 (from a proxy in front of the real server),
a write never is, and a server that hangs is given up on after the read timeout, not retried.
A connection dropped or left unanswered is a raw socket's: a real server does neither on
demand."""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kubectl_gpu import cluster, errors
from kubectl_gpu.cluster import transport
from tests.kit.plane.faults import Fault, FaultProxy
from tests.kit.plane.users import plain_kubeconfig

NODE = cluster.path("nodes", "gpu-a")


class RawServer:
    """A TCP server that reads each connection's request head, then hands the connection to
    `behaviour` (on a thread of its own). `connections` counts those whose request was for
    `NODE`: the test's own, not a stray client's that dialled a port it believed closed."""

    def __init__(self, behaviour: Callable[[socket.socket], None]) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.requests: list[str] = []  # the request line of each connection, as it came
        self.behaviour = behaviour
        self.open: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def connections(self) -> int:
        return sum(f" {NODE} " in line or f" {NODE}?" in line for line in self.requests)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.open.append(conn)
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        head = b""
        with contextlib.suppress(OSError):
            while b"\r\n\r\n" not in head and (chunk := conn.recv(65536)):
                head += chunk
        self.requests.append(head.split(b"\r\n", 1)[0].decode(errors="replace"))
        self.behaviour(conn)

    def close(self) -> None:
        self.listener.close()
        for conn in self.open:
            conn.close()


def _hang(conn: socket.socket) -> None:
    """Never answer."""


def _drop(conn: socket.socket) -> None:
    conn.close()


@pytest.fixture
def raw(request: pytest.FixtureRequest) -> Iterator[RawServer]:
    server = RawServer(request.param)
    yield server
    server.close()


def _api(port: int, tmp_path: Path, timeout: float = 20.0) -> cluster.Api:
    config = plain_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{port}")
    return cluster.connect(str(config), timeout=timeout)


@pytest.fixture
def api(proxied_kubeconfig: Path) -> cluster.Api:
    """The real server, through a proxy that refuses what a test tells it to."""
    return cluster.connect(str(proxied_kubeconfig))


def test_requests_carry_a_connect_and_a_read_timeout(tmp_path: Path) -> None:
    api = _api(9, tmp_path)
    assert (api.connect_timeout, api.timeout) == (cluster.CONNECT_TIMEOUT, cluster.READ_TIMEOUT)
    assert cluster.CONNECT_TIMEOUT + cluster.READ_TIMEOUT < 30  # a hung server: not 61 s


@pytest.mark.parametrize("raw", [_hang], indirect=True)
def test_a_hung_server_is_given_up_on_after_the_read_timeout(
    raw: RawServer, tmp_path: Path
) -> None:
    api = _api(raw.port, tmp_path, timeout=0.3)

    with pytest.raises(errors.ClusterError, match="cannot reach the API server"):
        api.get(NODE)

    assert raw.connections == 1  # a read timeout is not retried


@pytest.mark.parametrize("raw", [_hang], indirect=True)
def test_a_read_timeout_at_the_deadline_is_too_slow_not_unreachable(
    raw: RawServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`top` asks each node with its read timeout equal to its deadline; on a busy machine the
    socket's own timeout can fire before the thread that cuts the connection at the deadline
    runs (seen in a CI run: "cannot reach the API server … Read timed out" for a node whose
    agent did not answer in time, while every other node's answer came through that server)."""
    monkeypatch.setattr(transport, "_cut", lambda sock, watch: None)  # the cutter runs late
    api = dataclasses.replace(_api(raw.port, tmp_path, timeout=0.3), deadline=0.3)

    with pytest.raises(errors.ClusterError, match="did not finish its answer within 0.3s"):
        api.get(NODE)


@pytest.mark.parametrize("raw", [_drop], indirect=True)
def test_a_dropped_read_is_retried_once_a_dropped_write_never(
    raw: RawServer, tmp_path: Path
) -> None:
    api = _api(raw.port, tmp_path)

    with pytest.raises(errors.ClusterError, match="cannot reach the API server"):
        api.get(NODE)
    assert raw.connections == 2

    with pytest.raises(errors.ClusterError):
        api.patch(NODE, {"metadata": {"labels": {"a": "b"}}})
    assert raw.connections == 3


def test_a_503_on_a_read_is_retried_once_and_gets_the_real_answer(
    api: cluster.Api, fault_proxy: FaultProxy
) -> None:
    # (a 503 on a write is not repeated: tests/kit/plane/test_requests_survive_…)
    name = "retried-gpu-a"
    api.create(cluster.path("nodes"), {"apiVersion": "v1", "kind": "Node",
                                       "metadata": {"name": name}})  # fmt: skip
    fault_proxy.add(Fault("GET", f"/api/v1/nodes/{name}", status=503, retry_after=0))

    assert api.get(cluster.path("nodes", name))["metadata"]["uid"]  # the real server's node

    asked = [s.faulted for s in fault_proxy.seen if s.path.startswith(f"/api/v1/nodes/{name}")]
    assert asked == [True, False]
