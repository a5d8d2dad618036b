"""Benchmark (not a test): `kubectl gpu share --replicas 4 --dry-run=client` over many nodes of the
real kube-apiserver.

docs/architecture.md sets no figure of its own for share; the issue asks for it at 5,000 nodes, with
`kubectl get nodes -o json` against the same server as the baseline (both read every Node;
share also reads the DaemonSets, the ClusterPolicy and the plugin's ConfigMap, and plans one
row per node). Writes the synthetic cluster's Nodes and NVIDIA's Helm layout (DaemonSets and
config ConfigMap; benchmarks.rollout.install) into the fleet plane (benchmarks.populate: no
controller-manager, so the DaemonSets stay without pods, which a client dry run does not need),
then runs both commands as child processes, taking turns, and prints medians, the ratio, peak
RSS and share's exit status.

Run: `.venv/bin/python -m benchmarks.share_scale [--nodes 5000] [--runs 3]`.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time

from benchmarks import fleet, populate, rollout


@dataclasses.dataclass(frozen=True)
class Timed:
    """Median wall seconds, peak RSS (MiB) and the last exit status of one command."""

    seconds: float
    rss_mib: float
    code: int


def measure(nodes: int, runs: int) -> tuple[Timed, Timed, str]:
    """(share dry run, kubectl get nodes -o json, server version), taking turns."""
    plane = populate.fleet_plane()
    plane.start(timeout=180)
    try:
        started = time.perf_counter()
        rollout.install(plane, nodes)
        print(f"wrote {nodes} nodes and the Helm layout in {time.perf_counter() - started:.0f} s",
              file=sys.stderr, flush=True)  # fmt: skip
        kubeconfig = str(plane.kubeconfig)
        commands = {
            "share": [str(fleet.BIN / "kubectl-gpu"), "--kubeconfig", kubeconfig, "share",
                      "--replicas", "4", "--dry-run=client"],
            "nodes": [str(plane.kubectl), "--kubeconfig", kubeconfig, "get", "nodes", "-o", "json"],
        }  # fmt: skip
        samples: dict[str, list[tuple[float, float, int]]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, argv in commands.items():
                samples[name].append(fleet.run(argv))
        version = plane.server_version()
    finally:
        plane.stop()
    timed = {
        name: Timed(statistics.median(s for s, _, _ in got), max(r for _, r, _ in got), got[-1][2])
        for name, got in samples.items()
    }
    return timed["share"], timed["nodes"], version


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    share, nodes, version = measure(options.nodes, options.runs)
    print(f"{options.nodes} nodes on kube-apiserver {version}")
    print(
        f"kubectl gpu share --dry-run=client: median {share.seconds:.2f} s, "
        f"{share.rss_mib:.0f} MiB, exit {share.code}"
    )
    print(
        f"kubectl get nodes -o json:         median {nodes.seconds:.2f} s, {nodes.rss_mib:.0f} MiB"
    )
    print(f"ratio share / get nodes: {share.seconds / nodes.seconds:.2f}")


if __name__ == "__main__":
    main()
