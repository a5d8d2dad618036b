"""A simulated node's driver root: the project's `libnvidia-ml.so.1` laid out as on a GPU node
(test code only).

A real node's processes reach NVML through the driver's library under a driver root (the host's
`/`, or `/run/nvidia/driver` with the GPU Operator); NVIDIA's binaries take that root as
`--driver-root`/`NVIDIA_DRIVER_ROOT`, and pynvml loads `libnvidia-ml.so.1` through the dynamic
linker. A simulated node's root holds:

    <root>/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.<driver>   the C library (libnvml/c)
    <root>/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1          -> libnvidia-ml.so.<driver>
    <root>/usr/bin/nvidia-smi                                   tests/kit/node/smi.py, this node
    <root>/gpus.json (+ .lock)                                  the GPUs' state (statefile.py)
    <root>/nvml-strict, <root>/nvml-trace                       flags: strict mode, call log
    <root>/nvml-calls.log, <root>/nvml-unimplemented.log        what callers asked for

The library finds `gpus.json` from its own path (`dladdr`), so no process needs an environment
variable a real driver would not have. Owns: that layout, building the library (through
scripts/gobins.py, cached outside the clone) and reading the logs. Must not: write GPU state
(statefile.py and its users do) or hold NVML behaviour (tests/kit/node/libnvml/c).
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tests.kit.kube import builds

ROOT = Path(__file__).resolve().parents[4]
LIB_DIR = Path("usr/lib/x86_64-linux-gnu")
SONAME = "libnvidia-ml.so.1"
DRIVER_VERSION = "580.159.04"  # the driver read in tests/data/nvml


IN_PROCESS = "libnvidia-ml-in-process.so"  # the same library without a SONAME (clib.py)


@cache
def library(name: str = SONAME) -> Path:
    """The built library (scripts/gobins.py compiles it once per source change, in a second)."""
    return builds.program(name, "libnvml")


@dataclass(frozen=True)
class DriverRoot:
    """One node's driver root (see the module docstring for what lies where)."""

    path: Path

    @property
    def lib_dir(self) -> Path:
        return self.path / LIB_DIR

    @property
    def library(self) -> Path:
        return self.lib_dir / SONAME

    @property
    def state(self) -> Path:
        return self.path / "gpus.json"

    @property
    def bin_dir(self) -> Path:
        return self.path / "usr" / "bin"

    def env(self) -> dict[str, str]:
        """What a process on this node needs to find the driver: the linker's search path
        (as ldconfig gives a real node's processes) and nvidia-smi on PATH."""
        return {
            "LD_LIBRARY_PATH": os.pathsep.join(
                p for p in (str(self.lib_dir), os.environ.get("LD_LIBRARY_PATH", "")) if p
            ),
            "PATH": os.pathsep.join([str(self.bin_dir), os.environ.get("PATH", "")]),
        }

    def strict(self, on: bool = True) -> None:
        """Strict mode: an unimplemented NVML call prints its name and aborts the caller."""
        _flag(self.path / "nvml-strict", on)

    def trace(self, on: bool = True) -> None:
        """Log every NVML call's name (with the caller's pid) to nvml-calls.log."""
        _flag(self.path / "nvml-trace", on)

    def calls(self) -> list[str]:
        """The NVML functions called since tracing began, in order."""
        return _names(self.path / "nvml-calls.log")

    def unimplemented(self) -> list[str]:
        """The unimplemented NVML functions callers asked for (once per process each)."""
        return _names(self.path / "nvml-unimplemented.log")


def lay_out(path: Path, driver_version: str = DRIVER_VERSION) -> DriverRoot:
    """Make `path` a driver root with the library and nvidia-smi; the state file is the
    caller's to write (SimNode.share_state)."""
    root = DriverRoot(path)
    root.lib_dir.mkdir(parents=True, exist_ok=True)
    versioned = root.lib_dir / f"libnvidia-ml.so.{driver_version}"
    shutil.copyfile(library(), versioned)  # a copy: dladdr must find the library here
    root.library.unlink(missing_ok=True)
    root.library.symlink_to(versioned.name)
    _write_smi(root)
    return root


def in_process_library(root: DriverRoot) -> Path:
    """The library without a SONAME, in `root`, for loading into the test's own process: once
    loaded there, a library named libnvidia-ml.so.1 would answer every later
    `CDLL("libnvidia-ml.so.1")` of that process, as if the machine had a driver."""
    copy = root.lib_dir / IN_PROCESS
    shutil.copyfile(library(IN_PROCESS), copy)
    return copy


def _write_smi(root: DriverRoot) -> None:
    """`nvidia-smi` of this node: the stand-in, run by this Python, over this root's state."""
    root.bin_dir.mkdir(parents=True, exist_ok=True)
    smi = root.bin_dir / "nvidia-smi"
    smi.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "from pathlib import Path\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from tests.kit.node.smi import main\n"
        "sys.exit(main(driver_root=Path(__file__).resolve().parents[2]))\n"
    )
    smi.chmod(0o755)


def _flag(path: Path, on: bool) -> None:
    if on:
        path.touch()
    else:
        path.unlink(missing_ok=True)


def _names(log: Path) -> list[str]:
    try:
        lines = log.read_text().splitlines()
    except FileNotFoundError:
        return []
    return [line.split(" ", 1)[1] for line in lines if " " in line]
