"""The agent's report object is written only when the node's allocations or devices change: the
stand-in's request log counts the writes. A restarted agent (no digest in memory) does not
rewrite an unchanged report; a conflicting writer is re-read, not overwritten blindly."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from kubectl_gpu import cluster
from kubectl_gpu.errors import ClusterError
from kubectl_gpu.gpumap import join, report
from kubectl_gpu.workflows import reports
from tests.fakes.apiserver.server import FakeApiServer
from tests.gpumap import reportbuilders as b

REPORTS = "/apis/kubectl-gpu.io/v1/gpunodereports"


@pytest.fixture
def api(fake_apiserver: FakeApiServer, kubeconfig: Path) -> cluster.Api:
    api = cluster.connect(str(kubeconfig))
    b.install(fake_apiserver, api)
    b.add_node(fake_apiserver, "gpu-a")
    return api


def writes(server: FakeApiServer) -> list[str]:
    return [
        r.method
        for r in server.requests
        if r.method in ("POST", "PUT", "PATCH") and r.path.startswith(REPORTS)
    ]


def node_report(minute: int, pods: int = 1) -> report.NodeReport:
    gpus = b.gpus(2)
    held = tuple(b.held(f"p{n}", [gpus[n].uuid]) for n in range(pods))
    now = b.NOW + dt.timedelta(minutes=minute)
    return report.build("gpu-a", gpus, join.NodeSources(podresources=held), now)


def test_publishing_the_same_content_again_writes_nothing(
    api: cluster.Api, fake_apiserver: FakeApiServer
) -> None:
    digest = reports.publish(api, node_report(0), None)
    fake_apiserver.requests.clear()

    for minute in range(1, 6):  # the agent's poll loop: new timestamps, same node state
        digest = reports.publish(api, node_report(minute), digest)

    assert writes(fake_apiserver) == [] and len(fake_apiserver.requests) == 0


def test_a_changed_allocation_is_written_once(
    api: cluster.Api, fake_apiserver: FakeApiServer
) -> None:
    digest = reports.publish(api, node_report(0), None)
    digest = reports.publish(api, node_report(1, pods=2), digest)
    digest = reports.publish(api, node_report(2, pods=2), digest)

    assert writes(fake_apiserver) == ["POST", "PUT"]
    stored = api.get(cluster.path("gpunodereports", "gpu-a"))
    assert report.from_dict(stored).generated_at == "2026-05-01T12:01:00Z"
    assert len(report.from_dict(stored).allocations) == 2


def test_a_restarted_agent_does_not_rewrite_an_unchanged_report(
    api: cluster.Api, fake_apiserver: FakeApiServer
) -> None:
    reports.publish(api, node_report(0), None)

    reports.publish(api, node_report(30), None)  # restarted: it remembers no digest

    assert writes(fake_apiserver) == ["POST"]


def test_the_report_is_owned_by_its_node(api: cluster.Api, fake_apiserver: FakeApiServer) -> None:
    reports.publish(api, node_report(0), None)

    stored = api.get(cluster.path("gpunodereports", "gpu-a"))
    node = api.get(cluster.path("nodes", "gpu-a"))
    [owner] = stored["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "Node",
        "gpu-a",
        node["metadata"]["uid"],
    )


class RacingApi(cluster.Api):
    """Our own wrapper, not the library: another writer touches the report right before our
    first PUT, so the stand-in answers that PUT with a real 409 Conflict."""

    server: FakeApiServer | None = None
    raced: bool = False

    def replace(self, url: str, body: cluster.Json, *, dry_run: bool = False) -> cluster.Json:
        if not self.raced and self.server is not None:
            self.raced = True
            stored = self.server.store.get("gpunodereports", "gpu-a")
            stored["metadata"]["labels"] = {"touched-by": "someone-else"}
            self.server.store.update(stored)
        return super().replace(url, body, dry_run=dry_run)


def test_a_write_that_conflicts_is_retried_after_reading_again(
    api: cluster.Api, fake_apiserver: FakeApiServer
) -> None:
    digest = reports.publish(api, node_report(0), None)
    racing = RacingApi(api.client, api.context, api.server, api.timeout)
    racing.server = fake_apiserver
    fake_apiserver.requests.clear()

    reports.publish(racing, node_report(1, pods=2), digest)

    puts = [r.code for r in fake_apiserver.requests if r.method == "PUT"]
    assert puts == [409, 200]
    stored = api.get(cluster.path("gpunodereports", "gpu-a"))
    assert len(report.from_dict(stored).allocations) == 2


def test_a_node_that_is_gone_cannot_own_a_report(api: cluster.Api) -> None:
    gone = report.build("gpu-gone", b.gpus(1), join.NodeSources(podresources=()), b.NOW)

    with pytest.raises(ClusterError) as raised:
        reports.publish(api, gone, None)

    assert raised.value.status == 404
