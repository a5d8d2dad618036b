"""Benchmark (not a test): many real agents against the real kube-apiserver — what they cost
the server at rest, how fast a label reaches one, and the burst when all restart at once.

Budget (docs/architecture.md, "Budgets"): "agent at rest … learns of changes by watching; 5,000
agents ≤ 1 API request/s in total; a label change reaches the agent in ≤ 2 s". The control plane of
tests/kit/plane (etcd, kube-apiserver, controller-manager, scheduler, KWOK) runs with `--agents`
KWOK GPU nodes; each node's agent is the real `kubectl-gpu-agent` as a process of its own (the NVML
stand-in behind it, one L4). Every figure is counted by the server itself, from its audit log, by
the agents' user agent (`kubectl-gpu-agent/…`):

- start-up: requests per agent until every agent has published its report;
- at rest: requests in a window with no change (the agents' default resync is 12 h, so none
  is due), then the cost of one resync, measured with a short `--resync` in a second window,
  and the fleet's average at 5,000 agents = 5,000 × (rest rate + cost of a resync / 12 h);
- label → agent: the desired-MIG label set on some nodes (a config the ConfigMap lacks), and
  the time until the node's state label says `failed`: the agent woke, read, and wrote;
- restart burst: every agent stopped and started at once; the requests in the burst, and how
  many the server refused with 429 (API Priority and Fairness).

Run: `.venv/bin/python -m benchmarks.agent_fleet [--agents 20] [--rest 60]`; needs the control
plane's binaries (scripts/gobins.py builds them once).
"""

from __future__ import annotations

import argparse
import collections
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from kubectl_gpu import cluster, keys
from kubectl_gpu.errors import ClusterError

FLEET = 5000
RESYNC = 12 * 3600.0
SHORT_RESYNC = 15.0
AGENT = "kubectl-gpu-agent/"


def _create(api: cluster.Api, resource: str, body: dict[str, Any], namespace: str = "") -> None:
    try:
        api.create(cluster.path(resource, namespace=namespace or None), body)
    except ClusterError as e:
        if e.status != 409:
            raise


def _agents(events: list[dict[str, Any]], stage: str = "RequestReceived") -> list[Any]:
    return [
        e
        for e in events
        if str(e.get("userAgent", "")).startswith(AGENT) and e.get("stage") == stage
    ]


class Fleet:
    def __init__(self, plane: Any, count: int, directory: Path) -> None:
        from tests.gpumap.test_report_crd_matches_the_schema import crd

        self.plane, self.dir = plane, directory
        self.api = cluster.connect(str(plane.kubeconfig))
        self.nodes = [f"gpu-{i:04d}" for i in range(count)]
        _create(self.api, "customresourcedefinitions", crd())
        _create(self.api, "namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": keys.NAMESPACE}})  # fmt: skip
        configmap = {"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": keys.MIG_CONFIGMAP, "namespace": keys.NAMESPACE},
                     "data": {}}  # fmt: skip
        _create(self.api, "configmaps", configmap, keys.NAMESPACE)
        for node in self.nodes:
            body = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node, "labels": {"nvidia.com/gpu.present": "true"}},
            }
            _create(self.api, "nodes", body)  # fmt: skip
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self, resync: float) -> None:
        from tests.kit.node.agent import spawn

        self.processes = [
            spawn(self.plane.kubeconfig, node, i, self.dir / node, "--resync", str(resync))
            for i, node in enumerate(self.nodes)
        ]

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()

    def passed(self, since: float) -> int:
        beats = [self.dir / node / "heartbeat" for node in self.nodes]
        return sum(1 for b in beats if b.exists() and b.stat().st_mtime > since)

    def settle(self, since: float, quiet: float = 5.0, timeout: float = 600.0) -> float:
        """Wait until every agent finished a pass after `since` (its heartbeat, touched after
        each, is newer) and no agent request came for `quiet` seconds."""
        start = time.monotonic()
        while self.passed(since) < len(self.nodes):
            if time.monotonic() - start > timeout:
                raise RuntimeError(f"only {self.passed(since)} of {len(self.nodes)} agents ran")
            time.sleep(0.5)
        before = -1
        while True:
            count = len(_agents(self.plane.audit()))
            if count == before:
                return time.monotonic() - start
            before = count
            time.sleep(quiet)


def _label_latency(fleet: Fleet, count: int) -> list[float]:
    """Seconds from setting the desired label to the agent's `failed` on the Node."""
    found = []
    for node in fleet.nodes[:count]:
        body = {"metadata": {"labels": {keys.MIG_DESIRED_LABEL: "bench-missing"}}}
        start = time.monotonic()
        fleet.api.patch(cluster.path("nodes", node), body)
        while True:
            labels = fleet.api.get(cluster.path("nodes", node))["metadata"].get("labels") or {}
            if labels.get(keys.MIG_STATE_LABEL) == "failed":
                found.append(time.monotonic() - start)
                break
            if time.monotonic() - start > 60:
                found.append(float("inf"))
                break
            time.sleep(0.02)
    return found


def measure(count: int, rest: float, latency_nodes: int) -> dict[str, Any]:
    from tests.kit.plane.plane import ControlPlane

    result: dict[str, Any] = {"agents": count}
    plane = ControlPlane()
    with tempfile.TemporaryDirectory(prefix="kgb-fleet-") as tmp:
        plane.start(timeout=180)
        fleet = Fleet(plane, count, Path(tmp))
        try:
            mark = len(plane.audit())
            fleet.start(RESYNC)
            result["startup_s"] = fleet.settle(time.time())
            start_events = _agents(plane.audit()[mark:])
            result["startup_requests_per_agent"] = len(start_events) / count
            result["startup_by_verb"] = dict(
                collections.Counter(
                    f"{e['verb']} {e['objectRef'].get('resource', '')}" for e in start_events
                )  # fmt: skip
            )

            mark = len(plane.audit())
            time.sleep(rest)
            result["rest_window_s"] = rest
            result["rest_requests"] = len(_agents(plane.audit()[mark:]))

            latencies = _label_latency(fleet, latency_nodes)
            result["label_to_agent_s"] = latencies
            fleet.settle(0)

            fleet.stop()  # the burst: every agent at once
            mark = len(plane.audit())
            began = time.monotonic()
            fleet.start(RESYNC)
            fleet.settle(time.time())
            result["burst_s"] = time.monotonic() - began
            burst = plane.audit()[mark:]
            result["burst_requests"] = len(_agents(burst))
            answered = _agents(burst, "ResponseComplete")
            result["burst_429"] = sum(
                1 for e in answered if (e.get("responseStatus") or {}).get("code") == 429
            )

            fleet.stop()  # the cost of a resync: a short one, over a window
            fleet.start(SHORT_RESYNC)
            fleet.settle(time.time())
            mark = len(plane.audit())
            window = 4 * SHORT_RESYNC
            time.sleep(window)
            per_resync = len(_agents(plane.audit()[mark:])) / count / (window / SHORT_RESYNC)
            result["requests_per_resync"] = per_resync
        finally:
            fleet.stop()
            plane.stop()
    rest_rate = result["rest_requests"] / rest / count  # per agent per second
    result["fleet_at_rest_per_s"] = FLEET * (rest_rate + result["requests_per_resync"] / RESYNC)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--rest", type=float, default=60.0, help="seconds of the rest window")
    parser.add_argument("--latency-nodes", type=int, default=5)
    options = parser.parse_args()
    r = measure(options.agents, options.rest, options.latency_nodes)
    latencies = r["label_to_agent_s"]
    print(f"{r['agents']} real agents on the real kube-apiserver (KWOK nodes):")
    print(f"  start-up: {r['startup_requests_per_agent']:.1f} requests per agent "
          f"({r['startup_by_verb']}), settled in {r['startup_s']:.1f} s")  # fmt: skip
    print(f"  at rest: {r['rest_requests']} requests in {r['rest_window_s']:.0f} s; "
          f"a resync costs {r['requests_per_resync']:.1f} requests per agent; "
          f"{FLEET} agents at a 12 h resync: {r['fleet_at_rest_per_s']:.2f} requests/s "
          "(goal <= 1)")  # fmt: skip
    print(
        f"  label -> agent: median {statistics.median(latencies):.2f} s, "
        f"max {max(latencies):.2f} s over {len(latencies)} nodes (goal <= 2 s)"
    )
    print(
        f"  restart of all {r['agents']} at once: {r['burst_requests']} requests, "
        f"{r['burst_429']} answered 429, settled in {r['burst_s']:.1f} s"
    )


if __name__ == "__main__":
    main()
