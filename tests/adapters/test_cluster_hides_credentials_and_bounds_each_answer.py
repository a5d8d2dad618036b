"""Nothing leaked, nothing unbounded: a credential in the kubeconfig's server URL is never
printed (every `-v` level, `--debug`), a server that drips its answer a byte at a time is given
up on at the request's deadline, an answer larger than a request may hold is refused, and a
list whose items are not objects is an error, not a crash.

The real server's answers are dripped or rewritten by a `FaultProxy` in front of it; a header
that never ends and an endless body come from a raw socket (no proxy of a real answer can)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kubectl_gpu import cluster, errors
from tests.adapters.test_cluster_requests_time_out_and_retry_once import RawServer
from tests.conftest import CliResult
from tests.kit.plane.faults import Fault, FaultProxy
from tests.kit.plane.plane import ControlPlane
from tests.kit.plane.ports import refused_port
from tests.kit.plane.users import plain_kubeconfig, write_kubeconfig

SECRETS = ("alice", "S3CRET-PASSWORD", "Q-TOKEN-42", "FRAGMENT-7")
NODE = cluster.path("nodes", "gpu-a")


def _credentialed(port: int, tmp_path: Path) -> Path:
    url = f"http://alice:S3CRET-PASSWORD@127.0.0.1:{port}/?token=Q-TOKEN-42#FRAGMENT-7"
    return plain_kubeconfig(tmp_path / "kubeconfig", url)


def _everything(result: CliResult) -> str:
    shown = result.stdout + result.stderr
    if result.exception is not None:  # --debug: the traceback the user would see
        shown += "".join(traceback.format_exception(result.exception))
    return shown


@pytest.mark.parametrize("flags", [[], ["-v", "9"], ["--debug"], ["-v", "4", "--debug"]])
@pytest.mark.parametrize("command", [["map"], ["doctor", "gpu-pod"], ["status"]])
def test_a_credential_in_the_server_url_is_never_printed(
    run_cli: Callable[..., CliResult], tmp_path: Path, command: list[str], flags: list[str]
) -> None:
    with refused_port() as port:
        config = _credentialed(port, tmp_path)

        result = run_cli(*command, "--kubeconfig", str(config), *flags)

    shown = _everything(result)
    assert "cannot reach the API server at http://127.0.0.1:" in shown
    for secret in SECRETS:
        assert secret not in shown


def test_the_printed_server_keeps_scheme_host_port_and_path() -> None:
    assert cluster.redacted("https://u:p@k8s.example:6443/prefix?token=x#y") == (
        "https://k8s.example:6443/prefix"
    )
    assert cluster.redacted("https://[::1]:6443") == "https://[::1]:6443"


def _drip_headers(conn: socket.socket) -> None:
    try:
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        for _ in range(4096):
            conn.sendall(b"X")  # one header line that never ends
            time.sleep(0.02)
    except OSError:
        pass


def _flood(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
    conn.sendall(b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b'{"items":[' + b'{"kind":"Pod"},' * 4000
    try:
        while True:
            conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    except OSError:
        pass


@pytest.fixture
def raw(request: pytest.FixtureRequest) -> Iterator[RawServer]:
    server = RawServer(request.param)
    yield server
    server.close()


def test_a_real_answer_dripped_a_byte_at_a_time_is_given_up_on_at_the_deadline(
    proxied_kubeconfig: Path, fault_proxy: FaultProxy
) -> None:
    api = cluster.connect(str(proxied_kubeconfig))
    fault_proxy.add(Fault("GET", "/api/v1/nodes", drip=0.02))
    api.deadline = 0.3  # every byte comes well within the read timeout; the whole never does

    with pytest.raises(errors.ClusterError, match="did not finish its answer within 0.3s"):
        api.get(cluster.path("nodes"))
    assert [s.path for s in fault_proxy.seen] == ["/api/v1/nodes"]  # a slow server stays slow


@pytest.mark.parametrize("raw", [_drip_headers], indirect=True)
def test_a_header_that_never_ends_is_given_up_on_at_the_deadline(
    raw: RawServer, tmp_path: Path
) -> None:
    api = cluster.connect(str(plain_kubeconfig(tmp_path / "k", f"http://127.0.0.1:{raw.port}")))
    api.deadline = 0.3

    with pytest.raises(errors.ClusterError, match="did not finish its answer within 0.3s"):
        api.get(NODE)
    assert raw.connections == 1  # not retried


@pytest.mark.timeout(30)  # the slow one's deadline (60 s) must not be what ends the quick one
@pytest.mark.parametrize("raw", [_drip_headers], indirect=True)
def test_a_short_deadline_sent_after_a_long_one_is_cut_first(
    raw: RawServer, tmp_path: Path
) -> None:
    """One thread cuts every request at its deadline: a request sent while another waits for
    a later deadline must still be cut at its own, not when the first one's comes."""
    config = str(plain_kubeconfig(tmp_path / "k", f"http://127.0.0.1:{raw.port}"))
    slow, quick = cluster.connect(config), cluster.connect(config)
    slow.deadline, quick.deadline = 60.0, 0.3
    ended: list[str] = []

    def ask(api: cluster.Api, name: str) -> None:
        with contextlib.suppress(errors.ClusterError):
            api.get(NODE)
        ended.append(name)

    waiting = threading.Thread(target=ask, args=(slow, "slow"), daemon=True)
    waiting.start()
    while raw.connections < 1:  # the slow one is waiting for its headers
        time.sleep(0.01)

    with pytest.raises(errors.ClusterError, match="did not finish its answer within 0.3s"):
        quick.get(NODE)
    assert ended == [] and waiting.is_alive()  # the slow one was not cut with the quick one
    raw.close()  # let the slow one end


@pytest.mark.parametrize("raw", [_flood], indirect=True)
def test_an_answer_larger_than_the_limit_is_refused_not_held(
    raw: RawServer, tmp_path: Path
) -> None:
    api = cluster.connect(str(plain_kubeconfig(tmp_path / "k", f"http://127.0.0.1:{raw.port}")))
    api.max_answer = 1024 * 1024

    with pytest.raises(errors.ClusterError, match="larger than 1 MiB"):
        list(api.list(cluster.path("pods")))


def test_every_request_has_a_deadline_for_its_whole_answer(tmp_path: Path) -> None:
    api = cluster.connect(str(plain_kubeconfig(tmp_path / "k", "http://127.0.0.1:9")))
    assert api.deadline == cluster.ANSWER_DEADLINE <= 120
    assert api.max_answer == cluster.MAX_ANSWER_BYTES


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b'{"items": ["gpu-a", "gpu-b"]}', "an item is a JSON string"),
        (b'{"items": [null]}', "an item is a JSON null"),
        (b'{"items": {"a": 1}}', "items is a JSON object"),
        (b'{"items": [], "metadata": "x"}', "metadata is a JSON string"),
        (b"[1, 2]", "a JSON array"),
    ],
)
def test_list_items_of_the_wrong_type_are_a_cluster_error(
    proxied_kubeconfig: Path, fault_proxy: FaultProxy, body: bytes, said: str
) -> None:
    fault_proxy.add(Fault("GET", "/api/v1/nodes", rewrite=lambda _: body))
    api = cluster.connect(str(proxied_kubeconfig))

    with pytest.raises(errors.ClusterError, match=f"not a list of objects \\({said}\\)"):
        list(api.list(cluster.path("nodes")))


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (b"apiVersion: v1\nclusters: [\n", "line 3: not valid YAML"),
        (b"- a\n- b\n", "not a kubeconfig"),
        (b"\x00\xff\xfe", "not UTF-8 text"),
    ],
)
def test_a_malformed_kubeconfig_is_named_not_a_crash(
    run_cli: Callable[..., CliResult], tmp_path: Path, text: bytes, said: str
) -> None:
    config = tmp_path / "my-kubeconfig"
    config.write_bytes(text)

    result = run_cli("map", "--kubeconfig", str(config))

    assert result.exit_code == 1 and result.exception is None, result.stderr
    assert f"error: cannot read the kubeconfig {config}: {said}" in result.stderr


@pytest.mark.usefixtures("real_control_plane")
def test_v4_prints_each_request_as_it_is_answered_and_no_credential(
    run_cli: Callable[..., CliResult], module_plane: ControlPlane, tmp_path: Path
) -> None:
    creds = module_plane.creds
    assert creds is not None
    url = module_plane.url.replace("https://", "https://alice:S3CRET-PASSWORD@")
    config = write_kubeconfig(
        tmp_path / "kubeconfig", url, creds.ca_cert, {"token": creds.admin_token}, user="admin"
    )

    quiet = run_cli("doctor", "--kubeconfig", str(config))
    loud = run_cli("doctor", "--kubeconfig", str(config), "-v", "4")

    assert loud.exit_code == quiet.exit_code and loud.exception is None, loud.stderr
    assert "GET /api/v1/nodes?limit=500: 200" not in quiet.stderr
    assert "GET /api/v1/nodes?limit=500: 200 OK in " in loud.stderr
    for secret in ("alice", "S3CRET-PASSWORD", creds.admin_token):
        assert secret not in loud.stdout + loud.stderr
