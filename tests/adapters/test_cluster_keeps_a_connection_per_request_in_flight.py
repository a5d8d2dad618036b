"""Requests sent side by side reuse their connections: `share` deletes 16 pods at once and `top`
asks 16 agents at once, round after round. The Kubernetes client keeps 5 connections per CPU,
10 on a two-CPU machine; a connection beyond those was closed after its request and the next
request opened a new one, a TLS handshake for the API server and the command each time, and
urllib3 logged "Connection pool is full, discarding connection" for each.

Counted on the real kube-apiserver through the fault proxy, which sees each connection as the
client port it comes from; each request is held a moment there, so that all 16 are in flight
at once."""

from __future__ import annotations

import logging
import multiprocessing
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kubectl_gpu import cluster
from tests.kit.plane.faults import Fault, FaultProxy

AT_ONCE = 16  # share's deletes (restarts.PARALLEL) and top's agents (sources.CONCURRENCY)
ROUNDS = 4


def test_sixteen_requests_at_once_round_after_round_open_sixteen_connections(
    proxied_kubeconfig: Path,
    fault_proxy: FaultProxy,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(multiprocessing, "cpu_count", lambda: 2)  # the client's default: 10
    caplog.set_level(logging.WARNING, logger="urllib3")
    api = cluster.connect(str(proxied_kubeconfig))
    url = cluster.path("namespaces", "default")
    fault_proxy.add(Fault("GET", url, hang=0.3, times=AT_ONCE * ROUNDS))
    with ThreadPoolExecutor(AT_ONCE) as pool:
        for _ in range(ROUNDS):
            answers = list(pool.map(lambda _: api.get(url), range(AT_ONCE)))
            assert {a["metadata"]["name"] for a in answers} == {"default"}
    connections = {s.client for s in fault_proxy.seen if s.path == url}
    assert len([s for s in fault_proxy.seen if s.path == url]) == AT_ONCE * ROUNDS
    assert len(connections) <= AT_ONCE, f"{len(connections)} connections for {AT_ONCE} at once"
    assert not [r for r in caplog.records if "pool is full" in r.getMessage()]
