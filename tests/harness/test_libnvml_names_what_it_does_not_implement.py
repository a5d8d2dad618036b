"""A simulated node's libnvidia-ml.so.1 defines every function NVIDIA's nvml.h declares, so a Go
binary calling any of them never crashes on a missing symbol; those it does not implement answer
NOT_SUPPORTED and are named in the driver root's log, and in strict mode the caller aborts with
the name on stderr, so each binary's real needs can be listed (docs/simulated-nvml.md)."""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.kit.node.libnvml.driver import DriverRoot, in_process_library, lay_out
from tests.kit.node.libnvml.library import FakeLibNvml
from tests.kit.node.libnvml.statefile import GpuStateFile

# What a node's process does: pynvml finds the library through the dynamic linker.
CALLER = """
import pynvml
pynvml.nvmlInit()
gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
for _ in range(2):
    try:
        pynvml.nvmlDeviceGetPowerUsage(gpu)
    except pynvml.NVMLError_NotSupported:
        print("not supported")
"""


@pytest.fixture
def node(tmp_path: Path) -> DriverRoot:
    driver = lay_out(tmp_path / "driver")
    state = GpuStateFile(driver.state)
    with state.locked():
        state.save(FakeLibNvml(["H100-SXM5-80GB"]))
    return driver


def _run(driver: DriverRoot) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 (fixed argv)
        [sys.executable, "-c", CALLER],
        env={**os.environ, **driver.env()}, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip


def test_an_unimplemented_call_is_not_supported_and_named_once(node: DriverRoot) -> None:
    done = _run(node)

    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["not", "supported"] * 2
    assert node.unimplemented() == ["nvmlDeviceGetPowerUsage"]


def test_strict_mode_aborts_the_caller_naming_the_call(node: DriverRoot) -> None:
    node.strict()

    done = _run(node)

    assert done.returncode == -signal.SIGABRT
    assert "nvmlDeviceGetPowerUsage is not implemented" in done.stderr
    assert "not supported" not in done.stdout


def test_the_call_log_lists_every_call_in_order(node: DriverRoot) -> None:
    node.trace()

    assert _run(node).returncode == 0

    assert node.calls() == [
        "nvmlInitWithFlags",
        "nvmlDeviceGetHandleByIndex_v2",
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetPowerUsage",
    ]


def test_every_function_nvml_h_declares_is_defined(node: DriverRoot) -> None:
    module = ROOT / "tests" / "kit" / "node" / "libnvml" / "c"
    where = subprocess.run(  # noqa: S603 (fixed argv)
        ["go", "list", "-m", "-f", "{{.Dir}}", "github.com/NVIDIA/go-nvml"],  # noqa: S607
        cwd=module, capture_output=True, text=True, check=True,
        env={**os.environ, "GOFLAGS": "-mod=readonly"},
    )  # fmt: skip
    header = (Path(where.stdout.strip()) / "pkg" / "nvml" / "nvml.h").read_text()
    declared = set(re.findall(r"^\s*nvmlReturn_t\s+DECLDIR\s+(nvml\w+)\s*\(", header, re.M))
    library = ctypes.CDLL(str(in_process_library(node)))

    missing = sorted(name for name in declared if not hasattr(library, name))

    assert len(declared) > 300 and not missing
    assert hasattr(library, "nvmlErrorString")
