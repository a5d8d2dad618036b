"""A simulated node's `nvidia-smi -r` (its driver root's usr/bin/nvidia-smi, found on PATH as the
agent finds it) resets the GPU the node's libnvidia-ml.so.1 serves: on an A100 a pending MIG mode
becomes current, as on a real node, and a GPU with a process is refused with exit code 3."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kit.node.libnvml.driver import DriverRoot, lay_out
from tests.kit.node.libnvml.library import FakeLibNvml
from tests.kit.node.libnvml.statefile import GpuStateFile

MODE = """
import pynvml
pynvml.nvmlInit()
gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
if "set" in __import__("sys").argv:
    print(pynvml.nvmlDeviceSetMigMode(gpu, 1))
print(*pynvml.nvmlDeviceGetMigMode(gpu))
"""


@pytest.fixture
def node(tmp_path: Path) -> DriverRoot:
    driver = lay_out(tmp_path / "driver")
    state = GpuStateFile(driver.state)
    with state.locked():
        state.save(FakeLibNvml(["A100-SXM4-40GB"]))
    return driver


def _on(node: DriverRoot, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 (fixed argv)
        list(argv), env={**os.environ, **node.env()}, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip


def test_a_reset_makes_the_pending_mig_mode_current(node: DriverRoot) -> None:
    asked = _on(node, sys.executable, "-c", MODE, "set")
    assert asked.stdout.split() == ["16", "0", "1"]  # RESET_REQUIRED: current 0, pending 1

    reset = _on(node, "nvidia-smi", "-r", "-i", "0")

    assert reset.returncode == 0, reset.stderr
    assert "was successfully reset" in reset.stdout
    assert _on(node, sys.executable, "-c", MODE).stdout.split() == ["1", "1"]


def test_a_gpu_in_use_is_not_reset(node: DriverRoot) -> None:
    state = GpuStateFile(node.state)
    lib = FakeLibNvml(["A100-SXM4-40GB"])
    with state.locked():
        state.refresh(lib)
        lib.add_process(0, 4242)
        state.save(lib)

    reset = _on(node, "nvidia-smi", "-r", "-i", "0")

    assert reset.returncode == 3
    assert "being used by some other process" in reset.stderr
