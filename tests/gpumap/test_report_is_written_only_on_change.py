"""The agent's report object is written only when the node's allocations or devices change: a
proxy in front of the real kube-apiserver counts the writes. A restarted agent (no digest in
memory) does not rewrite an unchanged report; a conflicting writer is re-read, not overwritten
blindly (the proxy lets another client write just before our PUT; the real server answers 409)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubectl_gpu import cluster
from kubectl_gpu.errors import ClusterError
from kubectl_gpu.gpumap import join, report
from kubectl_gpu.workflows import reports
from tests.gpumap import reportbuilders as b
from tests.kit.plane.faults import Fault, FaultProxy
from tests.kit.plane.plane import ControlPlane

REPORTS = "/apis/kubectl-gpu.io/v1/gpunodereports"


@pytest.fixture(scope="module")
def admin(module_plane: ControlPlane) -> cluster.Api:
    """The administrator, straight to the server; the CRD installed once for the module."""
    api = cluster.connect(str(module_plane.kubeconfig))
    b.install(api)
    return api


@pytest.fixture
def api(admin: cluster.Api, proxied_kubeconfig: Path) -> Iterator[cluster.Api]:
    """Node gpu-a and no report yet, through the proxy."""
    admin.create(cluster.path("nodes"), b.node("gpu-a"))
    yield cluster.connect(str(proxied_kubeconfig))
    for url in (cluster.path("gpunodereports", "gpu-a"), cluster.path("nodes", "gpu-a")):
        try:
            admin.delete(url)
        except ClusterError as e:
            if e.status != 404:
                raise


def writes(proxy: FaultProxy) -> list[str]:
    return [
        s.method
        for s in proxy.seen
        if s.method in ("POST", "PUT", "PATCH") and s.path.startswith(REPORTS)
    ]


def node_report(minute: int, pods: int = 1) -> report.NodeReport:
    gpus = b.gpus(2)
    held = tuple(b.held(f"p{n}", [gpus[n].uuid]) for n in range(pods))
    now = b.NOW + dt.timedelta(minutes=minute)
    return report.build("gpu-a", gpus, join.NodeSources(podresources=held), now)


def test_publishing_the_same_content_again_writes_nothing(
    api: cluster.Api, fault_proxy: FaultProxy
) -> None:
    digest = reports.publish(api, node_report(0), None)
    fault_proxy.seen.clear()

    for minute in range(1, 6):  # the agent's poll loop: new timestamps, same node state
        digest = reports.publish(api, node_report(minute), digest)

    assert fault_proxy.seen == []  # not even a read


def test_a_changed_allocation_is_written_once(api: cluster.Api, fault_proxy: FaultProxy) -> None:
    digest = reports.publish(api, node_report(0), None)
    digest = reports.publish(api, node_report(1, pods=2), digest)
    digest = reports.publish(api, node_report(2, pods=2), digest)

    assert writes(fault_proxy) == ["POST", "PUT"]
    stored = api.get(cluster.path("gpunodereports", "gpu-a"))
    assert report.from_dict(stored).generated_at == "2026-05-01T12:01:00Z"
    assert len(report.from_dict(stored).allocations) == 2


def test_a_restarted_agent_does_not_rewrite_an_unchanged_report(
    api: cluster.Api, fault_proxy: FaultProxy
) -> None:
    reports.publish(api, node_report(0), None)

    reports.publish(api, node_report(30), None)  # restarted: it remembers no digest

    assert writes(fault_proxy) == ["POST"]


def test_the_report_is_owned_by_its_node(api: cluster.Api) -> None:
    reports.publish(api, node_report(0), None)

    stored = api.get(cluster.path("gpunodereports", "gpu-a"))
    node = api.get(cluster.path("nodes", "gpu-a"))
    [owner] = stored["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "Node",
        "gpu-a",
        node["metadata"]["uid"],
    )


def test_a_write_that_conflicts_is_retried_after_reading_again(
    api: cluster.Api, admin: cluster.Api, fault_proxy: FaultProxy
) -> None:
    digest = reports.publish(api, node_report(0), None)
    url = cluster.path("gpunodereports", "gpu-a")

    def another_writer() -> None:
        admin.patch(url, {"metadata": {"labels": {"touched-by": "someone-else"}}})

    fault_proxy.add(Fault("PUT", f"{REPORTS}/gpu-a", before=another_writer))
    fault_proxy.seen.clear()

    reports.publish(api, node_report(1, pods=2), digest)

    assert [s.status for s in fault_proxy.seen if s.method == "PUT"] == [409, 200]
    stored = api.get(url)
    assert len(report.from_dict(stored).allocations) == 2


def test_a_node_that_is_gone_cannot_own_a_report(api: cluster.Api) -> None:
    gone = report.build("gpu-gone", b.gpus(1), join.NodeSources(podresources=()), b.NOW)

    with pytest.raises(ClusterError) as raised:
        reports.publish(api, gone, None)

    assert raised.value.status == 404
