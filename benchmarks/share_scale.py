"""Benchmark (not a test): `kubectl gpu share --replicas 4 --dry-run=client` over many nodes.

DESIGN.md sets no figure of its own for share; the issue asks for it at 5,000 nodes, with
`kubectl get nodes -o json` against the same server as the baseline (both read every Node;
share also reads the DaemonSets, the ClusterPolicy and the plugin's ConfigMap, and plans one
row per node). Seeds the synthetic cluster's nodes and the Helm layout (benchmarks.synthetic)
into the API server stand-in in this process, then runs both commands as child processes,
taking turns, and prints medians, the ratio and peak RSS.

Run: `.venv/bin/python -m benchmarks.share_scale [--nodes 5000] [--runs 3]`.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks import synthetic
from benchmarks.map_scale import run_once
from tests.fakes.apiserver.server import FakeApiServer


@dataclasses.dataclass(frozen=True)
class Timed:
    """Median wall seconds and peak RSS (MiB) of one command over several runs."""

    seconds: float
    rss_mib: float


def share_argv(kubeconfig: str) -> list[str]:
    """The share dry run, as a user types it (through `python -m kubectl_gpu`)."""
    return [
        sys.executable,
        "-m",
        "kubectl_gpu",
        "--kubeconfig",
        kubeconfig,
        "share",
        "--replicas",
        "4",
        "--dry-run=client",
    ]


def compare(kubeconfig: str, runs: int) -> tuple[Timed, Timed | None]:
    """(share dry run, kubectl get nodes -o json), taking turns; None without kubectl."""
    kubectl = shutil.which("kubectl")
    commands = {"share": share_argv(kubeconfig)}
    if kubectl:
        commands["nodes"] = [kubectl, "--kubeconfig", kubeconfig, "get", "nodes", "-o", "json"]
    samples: dict[str, list[tuple[float, int]]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            samples[name].append(run_once(argv))
    timed = {
        name: Timed(statistics.median(s for s, _ in got), max(k for _, k in got) / 1024)
        for name, got in samples.items()
    }
    return timed["share"], timed.get("nodes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    with FakeApiServer() as server, tempfile.TemporaryDirectory() as tmp:
        scale = synthetic.seed(server, options.nodes, 0, with_pods=False)
        kubeconfig = str(server.write_kubeconfig(Path(tmp) / "kubeconfig"))
        share, nodes = compare(kubeconfig, options.runs)
    print(f"seeded {scale.nodes} nodes, {scale.gpus} GPUs")
    print(
        f"kubectl gpu share --dry-run=client: median {share.seconds:.2f} s, {share.rss_mib:.0f} MiB"
    )
    if nodes is not None:
        print(
            f"kubectl get nodes -o json:         median {nodes.seconds:.2f} s, "
            f"{nodes.rss_mib:.0f} MiB"
        )
        print(f"ratio share / get nodes: {share.seconds / nodes.seconds:.2f}")


if __name__ == "__main__":
    main()
