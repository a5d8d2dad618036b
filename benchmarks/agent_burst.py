"""Benchmark (not a test): thousands of real agent loops against the real kube-apiserver — the
whole fleet's requests at rest, and the burst when every agent restarts at once.

Budget (docs/architecture.md): "5,000 agents ≤ 1 API request/s in total" at rest; at a restart of
them all, no 429 storm and a server that stays responsive to `kubectl get nodes`. A process per
agent (benchmarks/agent_fleet.py) holds about 70 MiB each, so 5,000 do not fit this machine; here
each worker process runs many agents, each the real `kubectl_gpu.agent.main` in a thread of its
own (its own client, watches, back-off and heartbeat file; only the SIGTERM handler is left out,
as a signal handler belongs to the main thread: a restart kills the worker, as a pod deletion
whose grace period ran out does). The NVML stand-in (one L4) is shared by a worker's agents.
`--interval` is an hour: the interval paces the agent's local looks (NVML, kubelet files), not
its requests, and 5,000 local looks every 10 s would load this machine's Python, not the server.

The plane is the fleet benchmarks' (benchmarks.populate.fleet_plane: no audit log, no
controller-manager, KWOK leases of an hour); requests are counted by the server's /metrics
(`apiserver_request_total` by verb, resource, subresource and code), leaving out KWOK's Leases
and Node status heartbeats and this benchmark's own reads (/metrics, `kubectl get nodes`).

Run: `.venv/bin/python -m benchmarks.agent_burst [--agents 5000] [--per-worker 250] [--rest 60]`.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks import apimetrics, machine, populate
from kubectl_gpu import cluster, keys
from tests.kit.kube import objects

FLEET = 5000
RESYNC = 12 * 3600.0
# agents per worker process: at 500 (1,500 threads) a worker's own interpreter, not the server,
# held 2,000 agents back (none through a first pass in 3 minutes); at 250 they start in ~1 min
PER_WORKER = 250


def agents_only(
    calls: collections.Counter[tuple[str, str, str, str]], get_nodes: int = 0
) -> collections.Counter[tuple[str, str, str, str]]:
    """The agents' requests: not KWOK's (Leases, Node status), nor this benchmark's own
    (/metrics, and `get_nodes` runs of `kubectl get nodes`, a LIST of nodes per 500)."""
    kept = collections.Counter(
        {
            k: n
            for k, n in calls.items()
            if n > 0 and k[1] not in ("", "leases") and k[2] != "status"
        }
    )
    lists = ("LIST", "nodes", "", "200")
    kept[lists] = max(0, kept[lists] - get_nodes)
    return +kept


# ---- the worker: many agents in one process ---------------------------------------------------


def _worker(kubeconfig: str, directory: Path, nodes: list[str]) -> None:
    from tests.kit.node import libnvml
    from tests.kit.node.libnvml.statefile import GpuStateFile, load_library
    from tests.kit.node.nodes import NodeSpec, SimNode
    from tests.kit.node.smi import STATE_ENV

    state = directory / "gpus.json"
    (directory / "kubelet").mkdir(parents=True, exist_ok=True)
    SimNode(NodeSpec("swarm", "L4", 1), 0).share_state(state)
    os.environ[STATE_ENV] = str(state)
    libnvml.install(load_library(GpuStateFile(state)))

    from kubectl_gpu import agent
    from kubectl_gpu.agent import lifecycle

    @contextlib.contextmanager
    def no_signal(self: lifecycle.Shutdown) -> Iterator[lifecycle.Shutdown]:
        yield self  # a signal handler is the main thread's: the worker is killed instead

    lifecycle.Shutdown.installed = no_signal  # type: ignore[method-assign,assignment]
    for node in nodes:
        argv = ["--node-name", node, "--kubeconfig", kubeconfig,
                "--kubelet-root", str(directory / "kubelet"),
                "--heartbeat", str(directory / f"{node}.heartbeat"),
                "--interval", "3600", "--resync", str(RESYNC)]  # fmt: skip
        threading.Thread(target=agent.main, args=(argv,), daemon=True).start()
    signal.pause()


class Swarm:
    def __init__(self, kubeconfig: Path, nodes: list[str], per_worker: int, directory: Path):
        self.kubeconfig, self.nodes, self.dir = kubeconfig, nodes, directory
        self.groups = [nodes[i : i + per_worker] for i in range(0, len(nodes), per_worker)]
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        for n, group in enumerate(self.groups):
            directory = self.dir / f"worker-{n}"
            directory.mkdir(parents=True, exist_ok=True)
            command = [sys.executable, "-m", "benchmarks.agent_burst", "--worker",
                       str(self.kubeconfig), str(directory), ",".join(group)]  # fmt: skip
            with (directory / "agents.log").open("a") as log:
                self.processes.append(subprocess.Popen(command, stdout=log, stderr=log))

    def kill(self) -> None:
        for process in self.processes:
            process.kill()
        for process in self.processes:
            process.wait()
        self.processes = []

    def passed(self, since: float) -> int:
        count = 0
        for n, group in enumerate(self.groups):
            for node in group:
                beat = self.dir / f"worker-{n}" / f"{node}.heartbeat"
                with contextlib.suppress(FileNotFoundError):
                    count += beat.stat().st_mtime > since
        return count

    def rss_mib(self) -> float:
        total = 0
        for process in self.processes:
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        return total / 1024


def get_nodes(plane: Any) -> float:
    """Seconds for `kubectl get nodes` (all of them, the table) against the plane."""
    started = time.perf_counter()
    subprocess.run([str(plane.kubectl), "--kubeconfig", str(plane.kubeconfig), "get", "nodes"],
                   stdout=subprocess.DEVNULL, check=True)  # fmt: skip
    return time.perf_counter() - started


def _fleet(plane: Any, count: int) -> list[str]:
    from tests.gpumap.test_report_crd_matches_the_schema import crd

    writer = populate.Writer(plane)
    writer.create(cluster.path("customresourcedefinitions"), crd())
    writer.create(cluster.path("namespaces"), {"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": keys.NAMESPACE}})  # fmt: skip
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "data": {},
                 "metadata": {"name": keys.MIG_CONFIGMAP, "namespace": keys.NAMESPACE}}  # fmt: skip
    writer.create(cluster.path("configmaps", namespace=keys.NAMESPACE), configmap)
    names = [f"gpu-{i:04d}" for i in range(count)]

    def one(name: str) -> int:
        labels = {"nvidia.com/gpu.present": "true"}
        writer.create(cluster.path("nodes"), objects.node(name, labels=labels))
        return 1

    populate.run_all_of(names, one)
    populate.wait_established(writer)
    return names


def _settle(
    plane: Any, swarm: Swarm, since: float, timeout: float, probe: Any = None
) -> tuple[float, float]:
    """Seconds until every agent finished a pass after `since` (`probe()` runs meanwhile), and
    until the agents then sent nothing for 5 s: a pass that failed (a timeout under load) also
    ends with a heartbeat, and its agent retries after a back-off."""
    started = time.monotonic()
    while swarm.passed(since) < len(swarm.nodes):
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"only {swarm.passed(since)} of {len(swarm.nodes)} agents ran")
        if probe:
            probe()
        else:
            time.sleep(1)
    passed = time.monotonic() - started
    before = sum(agents_only(apimetrics.requests(plane)).values())
    while time.monotonic() - started < timeout:
        time.sleep(5)
        now = sum(agents_only(apimetrics.requests(plane)).values())
        if now == before:
            return passed, time.monotonic() - started - 5
        before = now
    raise RuntimeError(f"the agents were still sending requests after {timeout:.0f} s")


def measure(count: int, per_worker: int, rest: float, timeout: float) -> dict[str, Any]:
    result: dict[str, Any] = {"agents": count}
    plane = populate.fleet_plane()
    plane.start(timeout=180)
    with tempfile.TemporaryDirectory(prefix="kgb-burst-") as tmp:
        swarm = Swarm(plane.kubeconfig, _fleet(plane, count), per_worker, Path(tmp))
        try:
            result["at_rest_get_nodes_s"] = [get_nodes(plane) for _ in range(5)]
            before = apimetrics.requests(plane)
            swarm.start()
            result["startup_s"], result["startup_quiet_s"] = _settle(plane, swarm, 0, timeout)
            result["startup_requests"] = agents_only(apimetrics.requests(plane) - before)
            result["workers_rss_mib"] = swarm.rss_mib()
            before = apimetrics.requests(plane)
            time.sleep(rest)
            result["rest_requests"] = agents_only(apimetrics.requests(plane) - before)
            result["rest_s"] = rest
            result["rested_get_nodes_s"] = [get_nodes(plane) for _ in range(5)]

            swarm.kill()  # the burst: every agent at once
            before = apimetrics.requests(plane)
            during: list[float] = []
            restarted = time.time()
            swarm.start()
            result["burst_s"], result["burst_quiet_s"] = _settle(plane, swarm, restarted, timeout,
                                        lambda: during.append(get_nodes(plane)))  # fmt: skip
            result["burst_get_nodes_s"] = during
            result["burst_requests"] = agents_only(
                apimetrics.requests(plane) - before, len(during) * -(-count // 500)
            )
        finally:
            swarm.kill()
            plane.stop()
    return result


def refused_count(calls: collections.Counter[tuple[str, str, str, str]]) -> int:
    """Requests the server answered 429 (Too Many Requests: API Priority and Fairness)."""
    return sum(n for (_verb, _resource, _sub, code), n in calls.items() if code == "429")


def _by_verb(calls: collections.Counter[tuple[str, str, str, str]]) -> str:
    merged: collections.Counter[str] = collections.Counter()
    for (verb, resource, subresource, _code), n in calls.items():
        merged[f"{verb} {resource}{'/' + subresource if subresource else ''}"] += n
    return ", ".join(f"{n} {k}" for k, n in merged.most_common())


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        _worker(sys.argv[2], Path(sys.argv[3]), sys.argv[4].split(","))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=FLEET)
    parser.add_argument("--per-worker", type=int, default=PER_WORKER)
    parser.add_argument("--rest", type=float, default=60.0, help="seconds of the rest window")
    parser.add_argument("--timeout", type=float, default=900.0)
    options = parser.parse_args()
    print(f"machine: {machine.describe()}; {machine.load()}", flush=True)
    r = measure(options.agents, options.per_worker, options.rest, options.timeout)
    n = r["agents"]
    rest = sum(r["rest_requests"].values())
    at_rest = statistics.median(r["rested_get_nodes_s"])
    burst = r["burst_get_nodes_s"] or [float("nan")]
    refused = refused_count(r["burst_requests"])
    print(
        f"{n} real agents ({r['workers_rss_mib']:.0f} MiB in {-(-n // options.per_worker)} "
        f"workers) on kube-apiserver with {n} KWOK nodes; {machine.load()}"
    )
    print(
        f"  start-up: every agent through a pass in {r['startup_s']:.0f} s, quiet after "
        f"{r['startup_quiet_s']:.0f} s, "
        f"{sum(r['startup_requests'].values()) / n:.1f} requests per agent "
        f"({_by_verb(r['startup_requests'])})"
    )
    print(
        f"  at rest: {rest} requests in {r['rest_s']:.0f} s = {rest / r['rest_s']:.2f}/s "
        f"(goal <= 1/s for {FLEET}){': ' + _by_verb(r['rest_requests']) if rest else ''}"
    )
    print(
        f"  restart of all {n} at once: every agent through a pass in {r['burst_s']:.0f} s, "
        f"quiet after {r['burst_quiet_s']:.0f} s, "
        f"{sum(r['burst_requests'].values())} requests, {refused} answered 429 "
        f"({_by_verb(r['burst_requests'])})"
    )
    print(f"  kubectl get nodes: {statistics.median(r['at_rest_get_nodes_s']):.2f} s before the "
          f"agents, {at_rest:.2f} s at rest, during the burst median "
          f"{statistics.median(burst):.2f} s, max {max(burst):.2f} s over {len(burst)} runs "
          f"(x{statistics.median(burst) / at_rest:.1f} the rest median)")  # fmt: skip


if __name__ == "__main__":
    main()
