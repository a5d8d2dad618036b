"""The memory of a benchmark's own child processes, by program: what each simulated node's
programs (its agent, NVIDIA's device plugin and GFD) hold, which bounds how many nodes a machine
runs at once. Reads /proc only; must not start or stop anything."""

from __future__ import annotations

import collections
import os
from pathlib import Path

NODE_PROGRAMS = ("kubectl-gpu-agent", "nvidia-device-plugin", "gpu-feature-discovery")


def rss_by_program() -> dict[str, float]:
    """MiB resident in this process's descendants, by program (the node side's per node)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    ours, found = {os.getpid()}, True
    while found:
        found = False
        for pid, parent in parents.items():
            if parent in ours and pid not in ours:
                ours.add(pid)
                found = True
    pages: collections.Counter[str] = collections.Counter()
    for pid in ours - {os.getpid()}:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            rss = Path(f"/proc/{pid}/statm").read_text().split()[1]
        except OSError:
            continue
        words = [Path(a.decode(errors="replace")).name for a in argv if a]
        name = next((p for p in NODE_PROGRAMS if p in words), words[0] if words else "?")
        pages[name] += int(rss)
    return {name: n * os.sysconf("SC_PAGE_SIZE") / 2**20 for name, n in pages.items()}
