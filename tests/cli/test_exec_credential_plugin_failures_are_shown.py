"""A kubeconfig's exec credential plugin that fails (an expired SSO login, say) is named with
its own error and exit status, and nothing is sent to the server: the kubernetes client logs
the failure and goes on anonymously, which read as `system:anonymous` being forbidden and an
RBAC hint. On the real control plane, through the fault proxy that counts requests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conftest import CliResult
from tests.kit.plane.faults import FaultProxy

pytestmark = pytest.mark.usefixtures("real_control_plane")


def _exec_user(kubeconfig: Path, tmp_path: Path, script: str) -> Path:
    plugin = tmp_path / "sso-login"
    plugin.write_text(f"#!/bin/sh\n{script}\n")
    plugin.chmod(0o755)
    config = yaml.safe_load(kubeconfig.read_text())
    config["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": str(plugin),
            "interactiveMode": "Never",
        }
    }
    kubeconfig.write_text(yaml.safe_dump(config))
    return kubeconfig


@pytest.mark.parametrize("command", [["map"], ["status"], ["share", "show"]])
def test_the_plugins_own_error_is_shown_and_nothing_is_sent(
    run_cli: Callable[..., CliResult],
    proxied_kubeconfig: Path,
    fault_proxy: FaultProxy,
    tmp_path: Path,
    command: list[str],
) -> None:
    config = _exec_user(
        proxied_kubeconfig, tmp_path, "echo 'error: SSO session expired, run sso-login' >&2; exit 3"
    )

    result = run_cli(*command, "--kubeconfig", str(config))

    assert result.exit_code == 1 and result.exception is None, result.stderr
    assert (
        "the kubeconfig's exec credential plugin failed: exec: process returned 3. "
        "error: SSO session expired, run sso-login"
    ) in result.stderr
    assert "system:anonymous" not in result.stderr and "grant" not in result.stderr
    assert fault_proxy.seen == []


def test_a_plugin_that_is_missing_is_named(
    run_cli: Callable[..., CliResult],
    proxied_kubeconfig: Path,
    fault_proxy: FaultProxy,
    tmp_path: Path,
) -> None:
    config = yaml.safe_load(proxied_kubeconfig.read_text())
    config["users"][0]["user"] = {
        "exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "no-such-login"}
    }
    proxied_kubeconfig.write_text(yaml.safe_dump(config))

    result = run_cli("map", "--kubeconfig", str(proxied_kubeconfig))

    assert result.exit_code == 1, result.stderr
    assert "exec credential plugin failed" in result.stderr
    assert "no-such-login" in result.stderr
    assert fault_proxy.seen == []


def test_a_plugin_that_works_still_authenticates(
    run_cli: Callable[..., CliResult],
    proxied_kubeconfig: Path,
    fault_proxy: FaultProxy,
    tmp_path: Path,
) -> None:
    token = yaml.safe_load(proxied_kubeconfig.read_text())["users"][0]["user"]["token"]
    answer = (
        '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",'
        f'"status":{{"token":"{token}"}}}}'
    )
    config = _exec_user(proxied_kubeconfig, tmp_path, f"echo '{answer}'")

    result = run_cli("map", "--kubeconfig", str(config))

    assert result.exit_code == 0, result.stderr
    assert fault_proxy.seen
