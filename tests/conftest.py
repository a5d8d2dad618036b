"""Fixtures shared by the whole suite: running the CLI in-process, paths to data."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

# The API server stand-in's fixtures (fake_apiserver, kubeconfig, raw, api_client, kubectl) and
# the real control plane's (control_plane).
pytest_plugins = ["tests.fakes.apiserver.fixtures", "tests.controlplane.fixtures"]

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


@pytest.fixture
def run_cli() -> Callable[..., CliResult]:
    """Run `kubectl gpu ARGS...` in-process through the real root group and error boundary."""
    from kubectl_gpu.cli import cli

    def run(*args: str, input: str | bytes | None = None) -> CliResult:
        result = CliRunner().invoke(cli, list(args), input=input, prog_name="kubectl gpu")
        unexpected = result.exception if not isinstance(result.exception, SystemExit) else None
        return CliResult(result.exit_code, result.stdout, result.stderr, unexpected)

    return run
