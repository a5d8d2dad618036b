"""Benchmark (not a test): the readers on a real kube-apiserver with a fleet of KWOK GPU nodes.

DESIGN.md budget: "fleet (real kube-apiserver, 5,000 KWOK GPU nodes, 40,000 GPU pods):
`map -A` ≤ 0.5 × `kubectl get pods -A -o json`, ≤ 400 MiB". The control plane of
tests/controlplane runs; the cluster of `benchmarks/synthetic.py` (8×H100, 8×A100 with MIG
mixed, 4×L4 time-sliced ×4; one GPUNodeReport per node, built as the agent builds it; one
running pod per held device, bound to its node, KWOK marks it Running) is created through the
API. Each command then runs as a fresh process against the same server, three runs taking
turns; for each: median wall seconds, peak RSS, the ratio to `kubectl get pods -A -o json`,
and the reads the server counted meanwhile (its /metrics, `apiserver_request_total` by verb
and resource; KWOK's writes, leases and events that run meanwhile are left out).

Run: `.venv/bin/python -m benchmarks.fleet [--nodes 5000] [--pods 40000] [--runs 3]`; needs the
control plane's binaries (scripts/gobins.py builds them once).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import synthetic
from kubectl_gpu import cluster
from kubectl_gpu.errors import ClusterError
from kubectl_gpu.workflows import reports

BIN = Path(sys.executable).parent
_COUNTER = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+]+)$")


def _create(api: cluster.Api, url: str, body: dict[str, Any]) -> dict[str, Any]:
    for _ in range(20):
        try:
            return api.create(url, body)
        except ClusterError as e:
            if e.status == 409:
                return {}
            if e.status in (403, 429, 500, 503):  # no default ServiceAccount yet, or busy
                time.sleep(0.5)
                continue
            raise
    raise RuntimeError(f"could not create {url}")


def _fresh(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without what the stand-in's seed gives and a real server refuses."""
    for key in ("uid", "resourceVersion", "creationTimestamp"):
        obj["metadata"].pop(key, None)
    return obj


def populate(api: cluster.Api, nodes: int, pods: int, workers: int = 16) -> int:
    from tests.gpumap.test_report_crd_matches_the_schema import crd

    _create(api, cluster.path("customresourcedefinitions"), crd())
    for namespace in synthetic.NAMESPACES:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        _create(api, cluster.path("namespaces"), body)
    time.sleep(3)  # the CRD established, the namespaces' default ServiceAccounts made

    def one_node(index: int, held: int) -> int:
        kind = synthetic.kind_of(index, nodes)
        created = _create(api, cluster.path("nodes"), _fresh(synthetic.node_object(index, kind)))
        built = synthetic.node_report(index, kind, held)
        uid = str((created.get("metadata") or {}).get("uid", ""))
        _create(api, cluster.path("gpunodereports"), reports.body(built, uid, None))
        placed = 0
        for obj in synthetic._pods_of(built):
            obj.pop("status", None)  # KWOK runs it
            namespace = obj["metadata"]["namespace"]
            _create(api, cluster.path("pods", namespace=namespace), _fresh(obj))
            placed += 1
        return placed

    held = synthetic.held_per_node(nodes, pods)
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return sum(pool.map(one_node, range(nodes), held))


def _read(call: str, count: int) -> bool:
    """A read a command made: KWOK's pod and node patches, leases and events run meanwhile,
    and the one GET of /metrics (no resource) is this benchmark's."""
    verb, _, resource = call.partition(" ")
    return count > 0 and verb in ("GET", "LIST", "WATCH") and resource not in ("", "leases")


def counters(plane: Any) -> collections.Counter[str]:
    """`verb resource` → requests so far, from the server's /metrics."""
    text = subprocess.run(
        [str(plane.kubectl), "--kubeconfig", str(plane.kubeconfig), "get", "--raw", "/metrics"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    found: collections.Counter[str] = collections.Counter()
    for line in text.splitlines():
        match = _COUNTER.match(line)
        if match:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
            found[f"{labels.get('verb')} {labels.get('resource')}"] += int(float(match["value"]))
    return found


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


def main() -> None:
    from tests.controlplane.plane import ControlPlane

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=40000)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    plane = ControlPlane(scheduler=False)
    plane.start(timeout=180)
    try:
        api = cluster.connect(str(plane.kubeconfig))
        began = time.monotonic()
        placed = populate(api, options.nodes, options.pods)
        print(f"created {options.nodes} nodes, {placed} pods, {options.nodes} reports in "
              f"{time.monotonic() - began:.0f} s", file=sys.stderr)  # fmt: skip
        k = [str(plane.kubectl), "--kubeconfig", str(plane.kubeconfig)]
        g = [str(BIN / "kubectl-gpu"), "--kubeconfig", str(plane.kubeconfig)]
        commands = {
            "kubectl get pods -A -o json": [*k, "get", "pods", "-A", "-o", "json"],
            "kubectl gpu map -A": [*g, "map", "-A"],
            "kubectl gpu map -A -o json": [*g, "map", "-A", "-o", "json"],
            "kubectl gpu mig status": [*g, "mig", "status"],
            "kubectl gpu doctor": [*g, "doctor"],
            "kubectl gpu share show": [*g, "share", "show"],
            "kubectl gpu status": [*g, "status"],
        }
        walls: dict[str, list[float]] = collections.defaultdict(list)
        peaks: dict[str, float] = collections.defaultdict(float)
        codes: dict[str, int] = {}
        calls: dict[str, collections.Counter[str]] = {}
        for _ in range(options.runs):
            for name, argv in commands.items():
                before = counters(plane)
                wall, rss, code = run(argv)
                calls[name] = counters(plane) - before
                walls[name].append(wall)
                peaks[name] = max(peaks[name], rss)
                codes[name] = code
        base = statistics.median(walls["kubectl get pods -A -o json"])
        print(f"{options.nodes} KWOK GPU nodes, {placed} pods, kube-apiserver {plane.version}")
        print(f"{'command':30} {'wall s':>7} {'x get pods':>10} {'peak MiB':>9} exit  requests")
        for name in commands:
            wall = statistics.median(walls[name])
            made = ", ".join(f"{n} {v}" for v, n in sorted(calls[name].items()) if _read(v, n))
            print(f"{name:30} {wall:7.2f} {wall / base:10.2f} {peaks[name]:9.0f} {codes[name]:4}"
                  f"  {made}")  # fmt: skip
    finally:
        plane.stop()


if __name__ == "__main__":
    main()
