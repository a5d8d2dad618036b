"""Benchmark (not a test): LIST of 100,000 pods through the stand-in's real HTTP path.

DESIGN.md budgets the stand-in at ≤ 5 s for this LIST so that it never dominates a
benchmark. Seeds realistic pods (one GPU each, spread over 5,000 nodes and 50 namespaces)
through `store.create`, then times `GET /api/v1/pods` with urllib, reading the whole body,
and separately `json.loads` of it. Run: `python -m tests.fakes.apiserver.bench_list [N]`.
Must never be collected by pytest (no test_ names) nor assert on time.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request

from tests.fakes.apiserver.samples import pod
from tests.fakes.apiserver.seeding import Store
from tests.fakes.apiserver.server import FakeApiServer


def seed(store: Store, count: int) -> None:
    namespaces = [f"team-{n:02d}" for n in range(50)]
    for namespace in namespaces:
        store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    store.seed(
        pod(
            f"job-{index:06d}",
            namespaces[index % len(namespaces)],
            node_name=f"gpu-node-{index % 5000:04d}",
            labels={"app": "train", "job": f"j{index // 8}"},
            gpus=1,
        )
        for index in range(count)
    )


def timed_list(url: str) -> tuple[float, float, int, int]:
    """(seconds for the HTTP LIST incl. reading the body, seconds for json.loads, bytes, items)."""
    started = time.perf_counter()
    with urllib.request.urlopen(f"{url}/api/v1/pods", timeout=60) as response:
        body = response.read()
    fetched = time.perf_counter()
    items = len(json.loads(body)["items"])
    return fetched - started, time.perf_counter() - fetched, len(body), items


def main(count: int = 100_000) -> None:
    store = Store(history=1000)
    started = time.perf_counter()
    seed(store, count)
    seeded = time.perf_counter() - started
    with FakeApiServer(store) as server:
        runs = [timed_list(server.url) for _ in range(3)]
    best = min(runs)
    print(f"seeded {count} pods in {seeded:.1f} s")
    for http_s, parse_s, size, items in runs:
        megabytes = size / 1e6
        print(f"LIST {items} pods: {http_s:.2f} s over HTTP ({megabytes:.0f} MB), ", end="")
        print(f"client json.loads {parse_s:.2f} s")
    print(f"best LIST: {best[0]:.2f} s (budget 5 s)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
