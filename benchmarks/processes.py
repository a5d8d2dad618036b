"""The memory and CPU of a benchmark's own child processes, by program: what each simulated
node's programs (its agent, NVIDIA's device plugin and GFD) hold, which bounds how many nodes a
machine runs at once, and which of the plane's programs (kube-apiserver, etcd, KWOK, the
controller-manager, the scheduler) a phase of a benchmark kept busy. Reads /proc only; must not
start or stop anything."""

from __future__ import annotations

import collections
import os
from pathlib import Path

NODE_PROGRAMS = ("kubectl-gpu-agent", "nvidia-device-plugin", "gpu-feature-discovery")


def _descendants() -> set[int]:
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
    return ours - {os.getpid()}


def _program(pid: int) -> str:
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    words = [Path(a.decode(errors="replace")).name for a in argv if a]
    return next((p for p in NODE_PROGRAMS if p in words), words[0] if words else "?")


def rss_by_program() -> dict[str, float]:
    """MiB resident in this process's descendants, by program (the node side's per node)."""
    pages: collections.Counter[str] = collections.Counter()
    for pid in _descendants():
        try:
            pages[_program(pid)] += int(Path(f"/proc/{pid}/statm").read_text().split()[1])
        except OSError:
            continue
    return {name: n * os.sysconf("SC_PAGE_SIZE") / 2**20 for name, n in pages.items()}


def cpu_by_program() -> dict[str, float]:
    """CPU seconds (user and system) each running descendant has used since it started, by
    program: the difference of two readings is what a phase cost each of the plane's programs.
    A process that ended in between is not in the second reading (the caller counts its
    own children's CPU from getrusage)."""
    ticks: collections.Counter[str] = collections.Counter()
    for pid in _descendants():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks[_program(pid)] += int(fields[11]) + int(fields[12])
        except OSError:
            continue
    return {name: n / os.sysconf("SC_CLK_TCK") for name, n in ticks.items()}


def cpu_spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """What each program used between two readings of `cpu_by_program`, most first."""
    spent = {name: after[name] - before.get(name, 0.0) for name in after}
    return dict(sorted(spent.items(), key=lambda item: -item[1]))
