"""Credentials: a token (inline or in a tokenFile) that ends in a newline works, as it does for
kubectl, on the real control plane; and whatever fails (the server rejects the token, a server
quotes the Authorization header back, an exec plugin prints its output on failure, a bug),
no credential appears in any message, hint, log line or traceback, at any `-v` level or with
`--debug`. The internal-error line asks for the command and input, never a kubeconfig."""

from __future__ import annotations

import base64
import http.server
import subprocess
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kubectl_gpu.workflows import map as reading
from tests.conftest import CliResult
from tests.kit.plane.plane import ControlPlane
from tests.kit.plane.users import write_kubeconfig

pytestmark = pytest.mark.usefixtures("real_control_plane")

PLANTED = "kgpu-planted-7f3a9c1e5b2d4680aa11bb22cc33dd44"  # a token no server accepts
PASSWORD = "kgpu-planted-password-0d9e8f"
FLAGS = [[], ["-v", "9"], ["--debug"], ["-v", "4", "--debug"]]
COMMANDS = [["map"], ["status"], ["doctor"], ["share", "show"], ["mig", "status"]]


def _everything(result: CliResult) -> str:
    shown = result.stdout + result.stderr
    if result.exception is not None:
        shown += "".join(traceback.format_exception(result.exception))
    return shown


def _assert_hidden(result: CliResult, *secrets: str) -> None:
    shown = _everything(result)
    for secret in secrets:
        assert secret not in shown, shown


def _kubectl(plane: ControlPlane, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(config), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _admin_config(plane: ControlPlane, tmp_path: Path, form: str, token: str) -> Path:
    assert plane.creds is not None
    if form == "tokenFile":
        (tmp_path / "tok").write_text(token)
        fields = {"tokenFile": str(tmp_path / "tok")}
    else:
        fields = {"token": token}
    return write_kubeconfig(tmp_path / "kubeconfig", plane.url, plane.creds.ca_cert, fields,
                            user="admin")  # fmt: skip


@pytest.mark.parametrize(
    ("form", "around"), [("tokenFile", "\n"), ("tokenFile", " \r\n\n"), ("token", "  ")]
)
def test_a_token_with_whitespace_around_it_works_where_kubectl_works(
    run_cli: Callable[..., CliResult],
    module_plane: ControlPlane,
    tmp_path: Path,
    form: str,
    around: str,
) -> None:
    assert module_plane.creds is not None
    token = module_plane.creds.admin_token
    config = _admin_config(module_plane, tmp_path, form, f"{token}{around}")  # `echo $T > tok`

    kubectl = _kubectl(module_plane, config, "get", "nodes", "-o", "name")
    result = run_cli("map", "--kubeconfig", str(config))

    assert kubectl.returncode == 0, kubectl.stderr
    assert result.exit_code == 0, result.stderr
    assert result.exception is None
    _assert_hidden(result, token)


@pytest.mark.parametrize("token", ["{t}\n", "{t}\r\n", "{t}\x1b[2J", "{half}\n{rest}"])
def test_an_inline_token_with_a_line_break_is_refused_as_kubectl_refuses_it(
    run_cli: Callable[..., CliResult], module_plane: ControlPlane, tmp_path: Path, token: str
) -> None:
    assert module_plane.creds is not None
    real = module_plane.creds.admin_token
    text = token.format(t=real, half=real[:16], rest=real[16:])
    config = _admin_config(module_plane, tmp_path, "token", text)

    kubectl = _kubectl(module_plane, config, "get", "nodes", "-o", "name")
    result = run_cli("map", "--kubeconfig", str(config), "-v", "9")

    assert kubectl.returncode == 1 and "invalid header field value" in kubectl.stderr
    assert result.exit_code == 1, result.stderr
    assert "user 'admin' cannot be sent to the API server: its token holds a space, line " in (
        result.stderr
    )
    _assert_hidden(result, real, real[:16], real[16:])


@pytest.mark.parametrize("flags", FLAGS)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_rejected_token_is_never_printed(
    run_cli: Callable[..., CliResult],
    module_plane: ControlPlane,
    tmp_path: Path,
    command: list[str],
    flags: list[str],
) -> None:
    assert module_plane.creds is not None
    (tmp_path / "tok").write_text(f"{PLANTED}\n")
    config = write_kubeconfig(
        tmp_path / "kubeconfig",
        module_plane.url,
        module_plane.creds.ca_cert,
        {"tokenFile": str(tmp_path / "tok")},
        user="someone",
    )

    result = run_cli(*command, "--kubeconfig", str(config), *flags)

    assert result.exit_code == 1, result.stderr
    assert "401 Unauthorized" in result.stderr
    _assert_hidden(result, PLANTED)


class _Echoing(http.server.BaseHTTPRequestHandler):
    """A server that answers 500 quoting the request's Authorization header back (a proxy or
    a webhook that prints what it got)."""

    def do_GET(self) -> None:  # noqa: N802 - stdlib's name
        said = f"bad gateway for {self.headers.get('Authorization')}".encode()
        self.send_response(500)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(said)))
        self.end_headers()
        self.wfile.write(said)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib's name
        pass


@pytest.fixture
def echoing() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echoing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("flags", FLAGS)
@pytest.mark.parametrize("user", ["token", "basic"])
def test_a_server_that_quotes_the_credential_back_is_not_echoed(
    run_cli: Callable[..., CliResult], echoing: str, tmp_path: Path, flags: list[str], user: str
) -> None:
    fields = {"token": PLANTED} if user == "token" else {"username": "alice", "password": PASSWORD}
    config = write_kubeconfig(tmp_path / "kubeconfig", echoing, None, fields, user="someone")

    result = run_cli("map", "--kubeconfig", str(config), *flags)

    assert result.exit_code == 1, result.stderr
    assert "bad gateway for" in result.stderr  # the server's words are shown, its quote is not
    basic = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    _assert_hidden(result, PLANTED, PASSWORD, basic)


def _plugin(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "credential-plugin"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return script


def _exec_kubeconfig(tmp_path: Path, url: str, ca: Path | None, plugin: Path) -> Path:
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": str(plugin),
            "interactiveMode": "Never",
        }
    }
    return write_kubeconfig(tmp_path / "kubeconfig", url, ca, user, user="sso")  # type: ignore[arg-type]


@pytest.mark.parametrize("flags", FLAGS)
def test_an_exec_plugin_that_fails_quoting_its_token_is_not_echoed(
    run_cli: Callable[..., CliResult], echoing: str, tmp_path: Path, flags: list[str]
) -> None:
    plugin = _plugin(tmp_path, f"echo 'refresh failed for Bearer {PLANTED}' >&2\nexit 4")
    config = _exec_kubeconfig(tmp_path, echoing, None, plugin)

    result = run_cli("map", "--kubeconfig", str(config), *flags)

    assert result.exit_code == 1, result.stderr
    assert "exec credential plugin failed: exec: process returned 4" in result.stderr
    _assert_hidden(result, PLANTED)


def test_a_bug_quoting_a_credential_prints_neither_it_nor_a_request_to_paste_one(
    run_cli: Callable[..., CliResult],
    module_plane: ControlPlane,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    creds = module_plane.creds
    assert creds is not None
    config = write_kubeconfig(
        tmp_path / "kubeconfig",
        module_plane.url,
        creds.ca_cert,
        {"token": creds.admin_token},
        user="admin",
    )

    def buggy(*args: object, **kwargs: object) -> object:
        raise ValueError(f"Invalid header value b'Bearer {creds.admin_token}\\n'")

    monkeypatch.setattr(reading, "_reports", buggy)

    for flags in FLAGS:
        result = run_cli("map", "--kubeconfig", str(config), *flags)
        assert result.exit_code == 70, result.stderr
        _assert_hidden(result, creds.admin_token)
        assert "never a kubeconfig or a token" in result.stderr
