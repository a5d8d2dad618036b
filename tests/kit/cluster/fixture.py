"""The `sim_cluster` pytest fixture: a started `SimCluster` per call, stopped after the test.

Owns the cluster's lifetime in a test: `sim_cluster(nodes=[...], layout=..., configs=...,
default_config=..., controllers=...)` builds and starts one (kubeconfig under the test's
tmp_path) on the session's real control plane (sharedplane.py, unless `plane=` names another),
which is reset to new after the test, and returns it; where NVIDIA's device plugin cannot run in
a node sandbox (no root, no `unshare`) the test skips, saying why. At teardown every cluster is
stopped, a controller or store-subscriber exception fails the test, and no cluster thread may
outlive it. Also `kubectl_for(cluster, tmp_path)`, the server's own kubectl against a cluster.
Registered for the whole suite by `pytest_plugins` in tests/conftest.py; no test imports it.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from tests.kit.cluster.cluster import SimCluster
from tests.kit.kube.kubectl import KubectlRunner

_CLUSTERS = pytest.StashKey[list[SimCluster]]()
# How much of each node program's log a failed test's report shows.
_LOG_LINES = 40


class MakeSimCluster(Protocol):
    def __call__(self, *args: Any, **kwargs: Any) -> SimCluster: ...


@pytest.fixture
def sim_cluster(
    request: pytest.FixtureRequest, tmp_path: Path, real_control_plane: None
) -> Iterator[MakeSimCluster]:
    """`sim_cluster(nodes, layout, configs, default_config, controllers=…)` → started cluster
    on the session's real control plane."""
    made: list[SimCluster] = []
    before = set(threading.enumerate())

    request.node.stash[_CLUSTERS] = made  # for the node-side logs of a failed test

    def make(*args: Any, **kwargs: Any) -> SimCluster:
        from tests.kit.node import sandbox

        if sandbox.unavailable() is not None:  # NVIDIA's plugin runs in a node sandbox
            pytest.skip(str(sandbox.unavailable()))
        kwargs.setdefault("kubeconfig", tmp_path / f"kubeconfig-{len(made)}")
        shared = "plane" not in kwargs
        if shared:
            from tests.kit.plane import sharedplane  # lazy: needs the built binaries

            kwargs["plane"] = sharedplane.plane()
        cluster = SimCluster(*args, **kwargs)
        made.append(cluster)
        cluster.start()
        if shared:
            sharedplane.keep_crds(_standard_crds(cluster))
        return cluster

    try:
        yield make
    finally:
        stopped: list[Exception] = []
        for cluster in made:
            try:
                cluster.stop()
            except Exception as exc:  # the plane is still reset: the next test must not inherit
                stopped.append(exc)
        if any(not cluster.owns_plane for cluster in made):
            from tests.kit.plane import sharedplane

            sharedplane.reset()
        if stopped:
            raise stopped[0]
    errors = [e for cluster in made for e in cluster.errors]
    assert not errors, f"simulated controllers raised: {errors!r}\n{_first_traceback(errors)}"
    leftover = [
        t
        for t in set(threading.enumerate()) - before
        if t.name == "sim-cluster-loop"
        or "serve_forever" in t.name
        or t.name.startswith("apistore")
    ]
    assert not leftover, f"threads outlived the cluster: {leftover}"


def kubectl_for(cluster: SimCluster, tmp_path: Path) -> KubectlRunner:
    """The kubectl of the server's own release against `cluster`, isolated from ~/.kube."""
    return KubectlRunner(str(cluster.plane.kubectl), cluster.kubeconfig, tmp_path / "kubectl")


def _standard_crds(cluster: SimCluster) -> list[str]:
    """The CRDs a cluster installed as every cluster of its kind does: its layout's (the GPU
    Operator's ClusterPolicy) and NFD's."""
    objects = cluster.layout.objects if cluster.layout else ()
    names = [o["metadata"]["name"] for o in objects if o.get("kind") == "CustomResourceDefinition"]
    return names + (cluster.nfd_master.crd_names if cluster.nfd_master else [])


def _first_traceback(errors: list[BaseException]) -> str:
    return "".join(traceback.format_exception(errors[0])) if errors else ""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed test's report shows the end of every node program's log (NVIDIA's device
    plugin, GFD, the agents): on CI that is the only place a crash's own words survive."""
    report = yield
    clusters = item.stash.get(_CLUSTERS, [])
    if call.when == "call" and report.failed and clusters:
        for index, cluster in enumerate(clusters):
            for (namespace, pod, container, previous), text in sorted(cluster.logs.texts().items()):
                tail = "\n".join(text.splitlines()[-_LOG_LINES:])
                run = " (previous run)" if previous else ""
                report.sections.append(
                    (f"cluster {index}: {namespace}/{pod} {container}{run}", tail)
                )
    return report
