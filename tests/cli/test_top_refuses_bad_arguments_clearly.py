"""`kubectl gpu top` refuses what it cannot read before touching a cluster: exit 2, one line,
a hint; and its help loads no cluster client."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

from tests.conftest import CliResult

Run = Callable[..., CliResult]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["deployment/x"], "name node/NAME or pod NAME"),
        (["pod"], "name node/NAME or pod NAME"),
        (["node/a", "node/b"], "name node/NAME or pod NAME"),
        (["pod", "x", "-A"], "give -n, not -A"),
        (["-w", "--interval", "100ms"], "--interval must be at least 1s"),
        (["-w", "--idle", "1h"], "cannot be combined with --watch"),
        (["--idle", "soon"], "is not a duration"),
        (["--sort-by", "power"], "'power' is not one of 'memory', 'sm'"),
    ],
)
def test_bad_arguments_are_usage_errors(run_cli: Run, args: list[str], words: str) -> None:
    result = run_cli("--kubeconfig", "/nonexistent", "top", *args)
    assert result.exit_code == 2, result.stderr
    assert words in result.stderr and "Traceback" not in result.stderr


def test_top_help_imports_no_cluster_client() -> None:
    code = (
        "import sys; from kubectl_gpu.cli import cli\n"
        "try:\n    cli.main(['top', '--help'], standalone_mode=False)\nexcept SystemExit: pass\n"
        "print(sorted(m for m in ('kubernetes', 'pynvml', 'grpc') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"
