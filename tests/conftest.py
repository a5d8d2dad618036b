"""Fixtures shared by the whole suite: running the CLI in-process, paths to data."""

from __future__ import annotations

import dataclasses
import json
import logging
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

# Every fixture more than one folder uses, registered once, here, under one name: no test
# imports a fixture (tests/test_fixtures_are_registered_once.py). A fixture one folder uses
# lives in that folder's conftest.py. Which fixture gives which world: tests/README.md.
pytest_plugins = [
    "tests.kit.plane.fixtures",  # control_plane, module_plane, fault_proxy, proxied_kubeconfig
    "tests.kit.plane.staticplane",  # static_plane, static_client, static_store
    "tests.kit.cluster.fixture",  # sim_cluster
    "tests.kit.node.kubelet.fixture",  # fake_kubelet
    "tests.kit.node.libnvml.fixture",  # fake_nvml
    "tests.agent.fixtures",  # agent, background_agent, agent_fleet
    "tests.journey.fixtures",  # kubectl
]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DATA = Path(__file__).resolve().parent / "data"


@dataclasses.dataclass
class CliResult:
    """What a user sees: exit status, stdout, stderr."""

    exit_code: int
    stdout: str
    stderr: str
    exception: BaseException | None

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)


@pytest.fixture(autouse=True)
def _cli_logging_stays_in_its_test() -> Iterator[None]:
    """A command run in-process points the `kubectl_gpu` logger at its own stderr and stops it
    propagating (cli/settings.py), as a process of its own would; a later test in the same
    worker that reads logs through caplog would then hear nothing. Put it back."""
    logger = logging.getLogger("kubectl_gpu")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    yield
    logger.handlers[:], logger.level, logger.propagate = handlers, level, propagate


@pytest.fixture
def run_cli() -> Callable[..., CliResult]:
    """Run `kubectl gpu ARGS...` in-process through the real root group and error boundary."""
    return cli_runner()


def cli_runner() -> Callable[..., CliResult]:
    """What `run_cli` gives, for a script outside pytest."""
    from kubectl_gpu.cli import cli

    def run(*args: str, input: str | bytes | None = None) -> CliResult:
        result = CliRunner().invoke(cli, list(args), input=input, prog_name="kubectl gpu")
        unexpected = result.exception if not isinstance(result.exception, SystemExit) else None
        return CliResult(result.exit_code, result.stdout, result.stderr, unexpected)

    return run


# A test on the real control plane waits for real controllers (and, for the first test of a
# run, for the plane itself): the suite's 30 s default is for in-process tests. A module that
# sets its own timeout keeps it.
REAL_PLANE_TIMEOUT_S = 180


@pytest.fixture
def real_control_plane() -> None:
    """Marks a test as running on the session's real control plane (see pytest_collection…)."""


def pytest_configure(config: pytest.Config) -> None:
    """Commands the tests start get Ctrl-C as a terminal gives it, however pytest was started:
    a shell's background job (`make test &`, nohup) inherits SIGINT ignored, and so would every
    command a test interrupts (it would then wait out its `--timeout`). A handler set here is
    reset to the default in each child at exec."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "real_control_plane" in getattr(item, "fixturenames", ()) and (
            item.get_closest_marker("timeout") is None
        ):
            item.add_marker(pytest.mark.timeout(REAL_PLANE_TIMEOUT_S))


def eventually(check: Callable[[], Any], timeout: float, pause: float = 0.2) -> Any:
    """Ask `check` again every `pause` seconds until it answers something true or `timeout`
    seconds have passed; its last answer (the node side, KWOK and the agents each take their
    turn on a loaded machine)."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(pause)


# What a test that passed on its rerun said the first time (`make test` reruns a failed test
# once, tests/README.md): kept so the summary can show it, as a rerun is a flake to explain.
_RERUNS: list[tuple[str, str]] = []
_RERUN_TAIL = 6000  # characters of each first failure shown


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.outcome == "rerun":
        # the node programs' logs a simulated cluster adds (tests/kit/cluster/fixture.py)
        logs = "".join(f"--- {title}\n{text}\n" for title, text in report.sections
                       if title.startswith("cluster "))  # fmt: skip
        text = report.longreprtext[-_RERUN_TAIL:] + ("\n" + logs[-_RERUN_TAIL:] if logs else "")
        _RERUNS.append((report.nodeid, text))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for nodeid, text in _RERUNS:
        terminalreporter.write_sep("-", f"first failure of {nodeid} (passed on its rerun)")
        terminalreporter.write_line(text)
