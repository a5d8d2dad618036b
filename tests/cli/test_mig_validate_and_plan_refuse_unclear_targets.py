"""`kubectl gpu mig validate` and `mig plan` need one kind of target: GPU models (--gpu, with
--count GPUs each) or cluster nodes (--node). Both, neither, or --count without --gpu is a
usage error (exit 2) that says which flags to give, before the config file is read."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import ROOT, CliResult

Run = Callable[..., CliResult]
DEFAULT = str(
    ROOT / "tests" / "data" / "mig" / "mig-parted__deployments__systemd__config-default.yaml"
)
CONFIG = ("-c", "all-balanced")


@pytest.mark.parametrize("command", ["validate", "plan"])
@pytest.mark.parametrize(
    ("targets", "said"),
    [
        ((), "--gpu MODEL or --node NODE (not both)"),
        (("--gpu", "A100-40GB", "--node", "gpu-1"), "--gpu MODEL or --node NODE (not both)"),
        (("--node", "gpu-1", "--count", "2"), "--count applies to --gpu only"),
    ],
)
def test_unclear_targets_are_a_usage_error(
    run_cli: Run, command: str, targets: tuple[str, ...], said: str
) -> None:
    # a file that does not exist: the flags are refused before anything is read
    result = run_cli("mig", command, "-f", "/nonexistent/mig.yaml", *CONFIG, *targets)
    assert result.exit_code == 2, result.stderr
    assert said in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["validate", "plan"])
def test_gpu_models_with_a_count_are_checked(run_cli: Run, command: str) -> None:
    result = run_cli("mig", command, "-f", DEFAULT, *CONFIG, "--gpu", "A100-40GB", "--count", "2")
    assert result.exit_code == 0, result.stderr
