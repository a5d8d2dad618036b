"""Benchmark (not a test): the readers on a real kube-apiserver with a fleet of KWOK GPU nodes.

Budget (docs/architecture.md): "fleet (real kube-apiserver, 5,000 KWOK GPU nodes, 40,000 GPU pods):
`map -A` ≤ 0.5 × `kubectl get pods -A -o json`, ≤ 400 MiB". The control plane of
tests/kit/plane runs; the cluster of `benchmarks/synthetic.py` (8×H100, 8×A100 with MIG
mixed, 4×L4 time-sliced ×4; one GPUNodeReport per node, built as the agent builds it; one
running pod per held device, bound to its node, KWOK marks it Running) is created through the
API (benchmarks.populate: how, and what made it slow before), with one node in fifty a DRA
node (8 H100s through NVIDIA's DRA driver, each held by a ResourceClaim reserved for a running
pod). Each command then runs as a fresh process against the same server, three runs taking
turns; for each: median wall seconds, peak RSS, the ratio to `kubectl get pods -A -o json`,
and the reads the server counted meanwhile (its /metrics, `apiserver_request_total` by verb
and resource; KWOK's writes, leases and events that run meanwhile are left out).

Run: `.venv/bin/python -m benchmarks.fleet [--nodes 5000] [--pods 40000] [--runs 3]`; needs the
control plane's binaries (scripts/gobins.py builds them once).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import apimetrics, machine, populate

BIN = Path(sys.executable).parent


def _read(call: str, count: int) -> bool:
    """A read a command made: KWOK's pod and node patches, leases and events run meanwhile, a
    WATCH is counted when it ends (the server's and KWOK's own informers reopen theirs every
    few minutes; none of the commands watches), and the one GET of /metrics (no resource) is
    this benchmark's."""
    verb, _, resource = call.partition(" ")
    return count > 0 and verb in ("GET", "LIST") and resource not in ("", "leases")


def counters(plane: Any) -> collections.Counter[str]:
    """`verb resource` → requests so far, from the server's /metrics."""
    return apimetrics.by_verb(apimetrics.requests(plane))


_MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
used = resource.getrusage(resource.RUSAGE_CHILDREN)
print(time.perf_counter() - start, used.ru_maxrss, done.returncode)
"""


def run(argv: list[str]) -> tuple[float, float, int]:
    done = subprocess.run([sys.executable, "-c", _MEASURE, *argv], capture_output=True,
                          text=True, check=True)  # fmt: skip
    wall, rss, code = done.stdout.split()
    return float(wall), int(rss) / 1024, int(code)


BASELINE = "kubectl get pods -A -o json"


@dataclasses.dataclass
class Fleet:
    """What one fleet run measured: per command, wall seconds of each run, peak RSS in MiB,
    exit status and the requests the server counted during its last run."""

    nodes: int
    pods: int
    version: str
    populated: dict[str, float]
    walls: dict[str, list[float]]
    peaks: dict[str, float]
    codes: dict[str, int]
    calls: dict[str, collections.Counter[str]]

    def wall(self, name: str) -> float:
        return statistics.median(self.walls[name])

    def ratio(self, name: str) -> float:
        return self.wall(name) / self.wall(BASELINE)


def measure(nodes: int, pods: int, runs: int) -> Fleet:
    plane = populate.fleet_plane()
    plane.start(timeout=180)
    try:
        made = populate.populate(plane, nodes, pods)
        made["running"] = populate.running(plane)
        print(f"populated: {made}; {made['objects'] / made['total']:.0f} objects/s",
              file=sys.stderr, flush=True)  # fmt: skip
        k = [str(plane.kubectl), "--kubeconfig", str(plane.kubeconfig)]
        g = [str(BIN / "kubectl-gpu"), "--kubeconfig", str(plane.kubeconfig)]
        commands = {
            BASELINE: [*k, "get", "pods", "-A", "-o", "json"],
            "kubectl gpu map -A": [*g, "map", "-A"],
            "kubectl gpu map -A -o json": [*g, "map", "-A", "-o", "json"],
            "kubectl gpu mig status": [*g, "mig", "status"],
            "kubectl gpu doctor": [*g, "doctor"],
            "kubectl gpu share show": [*g, "share", "show"],
            "kubectl gpu status": [*g, "status"],
        }
        walls: dict[str, list[float]] = collections.defaultdict(list)
        peaks: dict[str, float] = collections.defaultdict(float)
        found = Fleet(nodes, pods, plane.server_version(), made, walls, peaks, {}, {})
        for _ in range(runs):
            for name, argv in commands.items():
                before = counters(plane)
                wall, rss, code = run(argv)
                found.calls[name] = counters(plane) - before
                found.walls[name].append(wall)
                found.peaks[name] = max(found.peaks[name], rss)
                found.codes[name] = code
        return found
    finally:
        plane.stop()


def report(found: Fleet) -> None:
    made = found.populated
    print(
        f"machine: {machine.describe()}; {machine.load()}; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    print(f"{found.nodes} KWOK GPU nodes ({populate.dra_nodes(found.nodes)} of them DRA), "
          f"{found.pods} pods, kube-apiserver {found.version}; populated at "
          f"{made['objects'] / made['total']:.0f} objects/s, all Running "
          f"{made['running']:.0f} s later")  # fmt: skip
    print(f"{'command':30} {'wall s':>7} {'x get pods':>10} {'peak MiB':>9} exit  requests")
    for name in found.walls:
        reads = ", ".join(f"{n} {v}" for v, n in sorted(found.calls[name].items()) if _read(v, n))
        print(f"{name:30} {found.wall(name):7.2f} {found.ratio(name):10.2f} "
              f"{found.peaks[name]:9.0f} {found.codes[name]:4}  {reads}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=40000)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    report(measure(options.nodes, options.pods, options.runs))


if __name__ == "__main__":
    main()
