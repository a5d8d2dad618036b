"""GPU nodes without an agent report are listed with the reason; the map reads the cluster with
one paginated LIST of reports and one of nodes, and touches DRA objects and pods only when the
cluster has NVIDIA ResourceClaims. No request is made per node."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kubectl_gpu import cluster
from tests.conftest import CliResult
from tests.fakes.apiserver.server import FakeApiServer
from tests.gpumap import reportbuilders as b

Run = Callable[..., CliResult]
NO_REPORT = "no agent report (is the agent running on this node?)"


def api_for(server: FakeApiServer, kubeconfig: Path) -> cluster.Api:
    api = cluster.connect(str(kubeconfig))
    b.install(server, api)
    return api


def test_a_gpu_node_without_a_report_is_listed_with_the_reason(
    run_cli: Run, fake_apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    api = api_for(fake_apiserver, kubeconfig)
    for name, gpu in (("gpu-a", True), ("gpu-b", True), ("cpu-1", False)):
        b.add_node(fake_apiserver, name, gpu)
    gpus = b.gpus(1)
    b.publish_node(api, "gpu-a", gpus, [b.held("train", [gpus[0].uuid])])

    result = run_cli("--kubeconfig", str(kubeconfig), "map", "-o", "json")

    assert result.exit_code == 0, result.stderr
    assert [r["node"] for r in result.json["items"]] == ["gpu-a"]
    assert f"node gpu-b: {NO_REPORT}" in result.stderr
    assert "gpu-a:" not in result.stderr and "cpu-1" not in result.stderr


def test_a_node_advertising_nvidia_capacity_counts_as_a_gpu_node(
    run_cli: Run, fake_apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    api_for(fake_apiserver, kubeconfig)
    node = b.samples.node("unlabelled")
    node["status"]["capacity"]["nvidia.com/mig-1g.5gb"] = "7"
    fake_apiserver.store.create(node)

    result = run_cli("--kubeconfig", str(kubeconfig), "map")

    assert result.exit_code == 0
    assert f"node unlabelled: {NO_REPORT}" in result.stderr
    assert "No resources found." in result.stderr


def test_without_the_report_resource_every_gpu_node_says_why(
    run_cli: Run, fake_apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    b.add_node(fake_apiserver, "gpu-a")  # no CRD installed: the LIST answers 404

    result = run_cli("--kubeconfig", str(kubeconfig), "map", "-A")

    assert result.exit_code == 0, result.stderr
    assert "node gpu-a: no agent report: the GPUNodeReport resource is not installed" in (
        result.stderr
    )


def test_a_named_node_that_does_not_exist_is_said_so(
    run_cli: Run, fake_apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    api = api_for(fake_apiserver, kubeconfig)
    b.add_node(fake_apiserver, "gpu-a")
    b.add_node(fake_apiserver, "gpu-b")
    for n, name in enumerate(("gpu-a", "gpu-b")):
        gpus = b.gpus(1, node=n)
        b.publish_node(api, name, gpus, [b.held(f"p{n}", [gpus[0].uuid])])

    result = run_cli("--kubeconfig", str(kubeconfig), "map", "gpu-b", "gpu-z", "-o", "json")

    assert [r["pod"] for r in result.json["items"]] == ["p1"]
    # as `kubectl get nodes gpu-b gpu-z`: what exists is shown, and the command fails
    assert result.exit_code == 1
    assert 'error: nodes "gpu-z" not found' in result.stderr


def test_a_selector_maps_only_the_matching_nodes(
    run_cli: Run, fake_apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    api = api_for(fake_apiserver, kubeconfig)
    store = fake_apiserver.store
    store.create(
        b.samples.node("h100-1", labels={"pool": "h100", "nvidia.com/gpu.present": "true"})
    )
    store.create(b.samples.node("l4-1", labels={"pool": "l4", "nvidia.com/gpu.present": "true"}))
    for n, name in enumerate(("h100-1", "l4-1")):
        gpus = b.gpus(1, node=n)
        b.publish_node(api, name, gpus, [b.held(f"p{n}", [gpus[0].uuid])])
    store.create(
        b.samples.node("h100-2", labels={"pool": "h100", "nvidia.com/gpu.present": "true"})
    )

    result = run_cli("--kubeconfig", str(kubeconfig), "map", "-l", "pool=h100", "-o", "json")

    assert [r["node"] for r in result.json["items"]] == ["h100-1"]
    assert f"node h100-2: {NO_REPORT}" in result.stderr and "l4-1" not in result.stderr
    [nodes] = [r for r in fake_apiserver.requests if r.path == "/api/v1/nodes"]
    assert "labelSelector=pool%3Dh100" in nodes.query


def test_the_map_reads_reports_with_one_paginated_list_and_no_request_per_node(
    run_cli: Run, fake_apiserver: FakeApiServer, kubeconfig: Path
) -> None:
    api = api_for(fake_apiserver, kubeconfig)
    names = [f"gpu-{n:02d}" for n in range(12)]
    for n, name in enumerate(names):
        b.add_node(fake_apiserver, name)
        gpus = b.gpus(2, node=n)
        b.publish_node(api, name, gpus, [b.held(f"p{n}", [gpus[0].uuid])])
    fake_apiserver.requests.clear()

    result = run_cli("--kubeconfig", str(kubeconfig), "map", "-A", "-o", "json")

    assert result.exit_code == 0, result.stderr
    assert sorted({r["node"] for r in result.json["items"]}) == names
    gets = [r for r in fake_apiserver.requests if r.method == "GET"]
    paths = [r.path for r in gets]
    assert set(paths) == {
        "/apis/kubectl-gpu.io/v1/gpunodereports",
        "/api/v1/nodes",
        "/apis/resource.k8s.io",  # one discovery GET: which DRA version the server serves
        "/apis/resource.k8s.io/v1/resourceclaims",
    }
    lists = [r for r in gets if r.path != "/apis/resource.k8s.io"]
    assert all("limit=" in r.query for r in lists)  # every other read is a paginated LIST
    assert (
        paths.count("/apis/resource.k8s.io") == 1
        and paths.count("/api/v1/nodes") == 1
        and paths.count("/apis/resource.k8s.io/v1/resourceclaims") == 1
    )
    assert not [r for r in fake_apiserver.requests if r.method != "GET"]
