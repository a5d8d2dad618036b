"""The `sim_cluster` pytest fixture: a started `SimCluster` per call, stopped after the test.

Owns the cluster's lifetime in a test: `sim_cluster(nodes=[...], layout=..., configs=...,
default_config=..., controllers=..., backend="real")` builds and starts one (kubeconfig under
the test's tmp_path) and returns it; with `backend="real"` it runs on the session's real
control plane (sharedplane.py), which is reset to new after the test. At teardown every
cluster is stopped, a controller or store-subscriber exception fails the test, and no cluster
thread may outlive it. Also `kubectl_for(cluster,
tmp_path)`, the real kubectl against a cluster (skips when none is on PATH). Must not be
collected as a conftest: tests import it with
`from tests.fakes.cluster.fixture import sim_cluster as sim_cluster`.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from tests.fakes.apiserver.kubectl_cli import KubectlRunner
from tests.fakes.cluster.cluster import SimCluster


class MakeSimCluster(Protocol):
    def __call__(self, *args: Any, **kwargs: Any) -> SimCluster: ...


@pytest.fixture
def sim_cluster(tmp_path: Path) -> Iterator[MakeSimCluster]:
    """`sim_cluster(nodes, layout, configs, default_config, controllers=…)` → started cluster
    (on the API server stand-in unless `backend="real"` is given)."""
    yield from _clusters(tmp_path, "stand-in")


@pytest.fixture
def real_cluster(tmp_path: Path, real_control_plane: None) -> Iterator[MakeSimCluster]:
    """As `sim_cluster`, on the session's real control plane unless `backend=` says otherwise;
    a test module moves to it with `from … import real_cluster as sim_cluster`."""
    yield from _clusters(tmp_path, "real")


def _clusters(tmp_path: Path, backend: str) -> Iterator[MakeSimCluster]:
    made: list[SimCluster] = []
    before = set(threading.enumerate())

    def make(*args: Any, **kwargs: Any) -> SimCluster:
        kwargs.setdefault("kubeconfig", tmp_path / f"kubeconfig-{len(made)}")
        kwargs.setdefault("backend", backend)
        if kwargs["backend"] == "real" and "plane" not in kwargs:
            from tests.fakes.cluster import sharedplane  # lazy: needs the built binaries

            kwargs["plane"] = sharedplane.plane()
        cluster = SimCluster(*args, **kwargs)
        made.append(cluster)
        return cluster.start()

    try:
        yield make
    finally:
        for cluster in made:
            cluster.stop()
        if any(cluster.real and not cluster.owns_plane for cluster in made):
            from tests.fakes.cluster import sharedplane

            sharedplane.reset()
    errors = [e for cluster in made for e in cluster.errors]
    assert not errors, f"simulated controllers raised: {errors!r}"
    leftover = [
        t
        for t in set(threading.enumerate()) - before
        if t.name == "sim-cluster-loop"
        or "serve_forever" in t.name
        or t.name.startswith("apistore")
    ]
    assert not leftover, f"threads outlived the cluster: {leftover}"


def kubectl_for(cluster: SimCluster, tmp_path: Path) -> KubectlRunner:
    """The real kubectl against `cluster`, isolated from ~/.kube; skips without kubectl."""
    # a real server's own kubectl release, else the one on PATH
    binary = str(cluster.plane.kubectl) if cluster.plane else shutil.which("kubectl")
    if binary is None:
        pytest.skip("no kubectl on PATH")
    return KubectlRunner(binary, cluster.kubeconfig, tmp_path / "kubectl")
