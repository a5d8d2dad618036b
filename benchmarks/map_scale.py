"""Benchmark (not a test): `kubectl gpu map -A -o json` against `kubectl get pods -A -o json`.

DESIGN.md budget: for 5,000 nodes / 40,000 GPUs / 100,000 allocations, the map must take at
most 0.5 × the time of `kubectl get pods -A -o json` against the same server, in at most
400 MiB RSS. Seeds the API server stand-in (in this process) with one GPUNodeReport per node,
built by `gpumap.report.build` as the agent builds it (8 GPUs, time-sliced 4 ways, 20 held
replicas per node by default) and one running pod per allocation; then runs each command as a
child process several times and prints the medians, the ratio and each command's peak RSS
(`resource.getrusage(RUSAGE_CHILDREN)` in a fresh wrapper process per command).

Run: `.venv/bin/python -m benchmarks.map_scale [--nodes 5000] [--runs 3] [--mix]` (default 200
nodes). `compare` (map JSON, map table, kubectl get pods) is what benchmarks.run_all uses.
Must never be collected by pytest, nor assert on time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import synthetic
from kubectl_gpu.gpumap import join, report
from kubectl_gpu.gpumap.allocations import Allocation, Gpu, Source, group_devices
from kubectl_gpu.workflows import reports
from tests.fakes.apiserver.crds import custom_resource_definition
from tests.fakes.apiserver.samples import node, pod
from tests.fakes.apiserver.server import FakeApiServer

NOW = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.timezone.utc)
NAMESPACES = [f"team-{n:02d}" for n in range(50)]
REPLICAS = 4
MEASURE = (
    "import resource, subprocess, sys\n"
    "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def node_report(index: int, gpus_per_node: int, held: int) -> report.NodeReport:
    name = f"gpu-node-{index:04d}"
    gpus = [
        Gpu(g, f"GPU-{index:08x}-{g:04x}-4000-8000-000000000000", "NVIDIA H100 80GB HBM3", g)
        for g in range(gpus_per_node)
    ]
    ids = [f"{g.uuid}::{r}" for g in gpus for r in range(REPLICAS)]
    allocations = tuple(
        Allocation(
            None,
            NAMESPACES[(index + n) % len(NAMESPACES)],
            f"job-{index:04d}-{n:03d}",
            "cuda",
            "nvidia.com/gpu",
            (ids[n],),
            Source.PODRESOURCES,
        )
        for n in range(min(held, len(ids)))
    )
    allocatable = group_devices([("nvidia.com/gpu", i) for i in ids], Source.PODRESOURCES)
    sources = join.NodeSources(podresources=allocations, allocatable=allocatable)
    return report.build(name, gpus, sources, NOW)


def seed(server: FakeApiServer, nodes: int, gpus_per_node: int, held: int) -> int:
    store = server.store
    crd = custom_resource_definition(
        "kubectl-gpu.io", "GPUNodeReport", "gpunodereports", namespaced=False
    )
    store.create(crd)
    for namespace in NAMESPACES:
        store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    count = 0
    for index in range(nodes):
        built = node_report(index, gpus_per_node, held)
        created = store.create(node(built.node, labels={"nvidia.com/gpu.present": "true"}))
        store.create(reports.body(built, created["metadata"]["uid"], None))
        store.seed(
            pod(a.pod or "", a.namespace or "default", node_name=built.node, gpus=1)
            for a in built.allocations
        )
        count += len(built.allocations)
    return count


def run_once(argv: list[str]) -> tuple[float, int]:
    """Wall seconds of one run of `argv` and its peak RSS (KiB), from a fresh wrapper process."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *argv], capture_output=True, text=True, check=True
    )
    return time.perf_counter() - started, int(done.stdout.strip())


def measure(argv: list[str], runs: int) -> tuple[float, int]:
    """Median wall seconds over `runs`, and the peak RSS (KiB) of one run."""
    times, peaks = [], []
    for _ in range(runs):
        seconds, kib = run_once(argv)
        times.append(seconds)
        peaks.append(kib)
    return statistics.median(times), max(peaks)


def map_argv(kubeconfig: str, *output: str) -> list[str]:
    """`kubectl gpu map -A [OUTPUT]` as a user runs it (through `python -m kubectl_gpu`)."""
    return [sys.executable, "-m", "kubectl_gpu", "--kubeconfig", kubeconfig, "map", "-A", *output]


def compare(kubeconfig: str, runs: int) -> dict[str, tuple[float, int]]:
    """Median seconds and peak RSS (KiB) of `map -A -o json`, `map -A` (the table) and, with
    kubectl on PATH, `kubectl get pods -A -o json`; the commands take turns, so load on the
    machine hits each alike."""
    commands = {"map-json": map_argv(kubeconfig, "-o", "json"), "map-table": map_argv(kubeconfig)}
    kubectl = shutil.which("kubectl")
    if kubectl:
        commands["get-pods"] = [
            kubectl,
            "--kubeconfig",
            kubeconfig,
            "get",
            "pods",
            "-A",
            "-o",
            "json",
        ]
    samples: dict[str, list[tuple[float, int]]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            samples[name].append(run_once(argv))
    return {
        name: (statistics.median(s for s, _ in got), max(k for _, k in got))
        for name, got in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--allocations-per-node", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--map-only", action="store_true", help="skip kubectl get pods")
    parser.add_argument(
        "--mix",
        action="store_true",
        help="the realistic mix of benchmarks.synthetic (H100, A100 MIG, L4 time-sliced), "
        "20 pods per node on average, instead of uniform H100 nodes",
    )
    options = parser.parse_args()
    kubectl = shutil.which("kubectl")
    with FakeApiServer() as server, tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        if options.mix:
            scale = synthetic.seed(server, options.nodes, options.nodes * 20)
            gpus, allocations = scale.gpus, scale.pods
        else:
            gpus = options.nodes * options.gpus_per_node
            allocations = seed(
                server, options.nodes, options.gpus_per_node, options.allocations_per_node
            )
        kubeconfig = str(server.write_kubeconfig(Path(tmp) / "kubeconfig"))
        print(
            f"seeded {options.nodes} nodes, {gpus} GPUs, "
            f"{allocations} allocations/pods in {time.perf_counter() - started:.1f} s"
        )
        ours = map_argv(kubeconfig, "-o", "json")
        map_s, map_kib = measure(ours, options.runs)
        print(
            f"kubectl gpu map -A -o json:   median {map_s:.2f} s, peak RSS {map_kib / 1024:.0f} MiB"
        )
        if kubectl is None or options.map_only:
            print("no kubectl run: no ratio")
            return
        theirs = [kubectl, "--kubeconfig", kubeconfig, "get", "pods", "-A", "-o", "json"]
        pods_s, pods_kib = measure(theirs, options.runs)
        print(
            f"kubectl get pods -A -o json:  median {pods_s:.2f} s, "
            f"peak RSS {pods_kib / 1024:.0f} MiB"
        )
        print(f"ratio map / get pods: {map_s / pods_s:.2f} (budget <= 0.5; RSS budget 400 MiB)")


if __name__ == "__main__":
    main()
