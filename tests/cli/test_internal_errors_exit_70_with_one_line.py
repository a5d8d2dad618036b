"""A bug is not a bad file: an unexpected exception prints one line naming the command and its
input and where to report it, and exits 70; `--debug` shows the traceback (without
credentials) and exits the same way. The same for the
agent's entry point, whose loop outlives a bug in one pass."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from kubectl_gpu import agent, cluster, errors, validation
from kubectl_gpu.agent import reconcile
from tests.conftest import ROOT, CliResult

Run = Callable[..., CliResult]


def _boom(*args: object, **kwargs: object) -> object:
    raise RuntimeError("boom \x1b[2J")


@pytest.fixture
def buggy_validate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(validation, "validate_text", _boom)


@pytest.mark.usefixtures("buggy_validate")
def test_a_bug_exits_70_with_one_line_naming_command_and_input(
    run_cli: Run, tmp_path: Path
) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text("version: v1\n")

    result = run_cli("validate", "-f", str(path))

    assert result.exit_code == 70 == errors.ExitCode.INTERNAL
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert f"internal error in `kubectl gpu validate -f {path}`" in lines[0]
    assert "RuntimeError: boom" in lines[0] and "\x1b" not in lines[0]
    assert errors.REPORT_BUGS in lines[0] and "--debug" in lines[0]
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.usefixtures("buggy_validate")
def test_debug_shows_the_traceback(run_cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text("version: v1\n")

    result = run_cli("validate", "-f", str(path), "--debug")

    assert result.exit_code == 70 and result.exception is None
    assert "Traceback (most recent call last)" in result.stderr
    assert "RuntimeError: boom" in result.stderr


def test_the_exit_code_is_documented(run_cli: Run) -> None:
    assert "70 internal error" in run_cli("--help").stdout
    assert "70" in (ROOT / "README.md").read_text().split("Exit status")[1][:400]


def test_the_agent_exits_70_in_one_line_on_a_bug_outside_its_loop(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(cluster, "connect", _boom)

    with caplog.at_level(logging.ERROR):
        status = agent.main(["--node-name", "gpu-1", "--once"])

    assert status == 70
    (record,) = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "internal error in kubectl-gpu-agent" in record.getMessage()
    assert "RuntimeError: boom" in record.getMessage() and record.exc_info is None


def test_the_agent_debug_flag_logs_the_traceback(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(cluster, "connect", _boom)

    with caplog.at_level(logging.ERROR):
        assert agent.main(["--node-name", "gpu-1", "--once", "--debug"]) == 70

    assert any(r.exc_info for r in caplog.records)


def test_the_agent_loop_goes_on_after_a_bug_in_a_pass(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    passes: list[int] = []

    def buggy(*args: object, **kwargs: object) -> object:
        passes.append(1)
        raise KeyError("surprise")

    class Due:
        """Every wait ends with a pass due (as after a failed pass's back-off); the fourth
        pass stops the loop."""

        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        def start(self) -> None:
            pass

        def passed(self) -> None:
            if len(passes) >= 3:
                _stop()

        def wait(self, seconds: float) -> bool:
            return True

        def stop(self) -> None:
            pass

    monkeypatch.setattr(cluster, "connect", lambda kubeconfig, **kwargs: object())
    monkeypatch.setattr(reconcile, "reconcile", buggy)
    monkeypatch.setattr(agent.reporting, "publish", lambda api, sources, digest: digest)
    monkeypatch.setattr(agent.watches, "Wakeups", Due)
    heartbeat = tmp_path / "beat"

    with pytest.raises(_Stop), caplog.at_level(logging.ERROR):
        agent.main(["--node-name", "gpu-1", "--heartbeat", str(heartbeat)])

    assert len(passes) == 3 and heartbeat.exists()
    logged = [r.getMessage() for r in caplog.records]
    assert sum("internal error in the reconcile pass" in m for m in logged) == 3


class _Stop(BaseException):
    pass


def _stop() -> None:
    raise _Stop
