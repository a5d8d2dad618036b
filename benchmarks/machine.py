"""The machine a benchmark ran on, as each benchmark prints it beside its figures: CPUs, CPU
model, memory, Python, and the load average (the machine may be shared). Must not measure
anything itself; every benchmark imports it, so it imports no other benchmark."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def describe() -> str:
    """CPUs, CPU model, memory and Python, read from /proc where there is one."""
    model = memory = "?"
    cpuinfo, meminfo = Path("/proc/cpuinfo"), Path("/proc/meminfo")
    if cpuinfo.exists():
        names = [line for line in cpuinfo.read_text().splitlines() if line.startswith("model name")]
        model = names[0].split(":", 1)[1].strip() if names else "?"
    if meminfo.exists():
        kib = int(meminfo.read_text().split()[1])
        memory = f"{kib / 1024 / 1024:.1f} GiB"
    return (
        f"{os.cpu_count()} CPUs ({model}), {memory} memory, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )


def load() -> str:
    """The load average now, in one phrase."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"
