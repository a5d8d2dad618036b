"""GPU nodes without an agent report are listed with the reason; the map reads the cluster with
one paginated LIST of reports and one of nodes, and touches DRA objects and pods only when the
cluster has NVIDIA ResourceClaims. No request is made per node.

On the real control plane: the report CRD is served (and its schema enforced) by the real
server, and which requests the map sent is read from the real server's audit log."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kubectl_gpu import cluster
from tests.cli import clirequests
from tests.conftest import CliResult
from tests.gpumap import reportbuilders as b
from tests.kit.cluster import SimCluster

Run = Callable[..., CliResult]
NO_REPORT = "no agent report (is the agent running on this node?)"


def api_for(real: SimCluster) -> cluster.Api:
    """The report CRD installed, as the agent's manifests do."""
    api = cluster.connect(str(real.kubeconfig))
    b.install(api)
    return api


def add_node(real: SimCluster, name: str, gpu: bool = True, **labels: str) -> None:
    labels = {**({"nvidia.com/gpu.present": "true"} if gpu else {}), **labels}
    real.client.create(b.objects.node(name, labels=labels))


def test_a_gpu_node_without_a_report_is_listed_with_the_reason(
    run_cli: Run, real: SimCluster, kubeconfig: Path
) -> None:
    api = api_for(real)
    for name, gpu in (("gpu-a", True), ("gpu-b", True), ("cpu-1", False)):
        add_node(real, name, gpu)
    gpus = b.gpus(1)
    b.publish_node(api, "gpu-a", gpus, [b.held("train", [gpus[0].uuid])])

    result = run_cli("--kubeconfig", str(kubeconfig), "map", "-o", "json")

    assert result.exit_code == 0, result.stderr
    assert [r["node"] for r in result.json["items"]] == ["gpu-a"]
    assert f"node gpu-b: {NO_REPORT}" in result.stderr
    assert "gpu-a:" not in result.stderr and "cpu-1" not in result.stderr


def test_a_node_advertising_nvidia_capacity_counts_as_a_gpu_node(
    run_cli: Run, real: SimCluster, kubeconfig: Path
) -> None:
    api_for(real)
    node = b.objects.node("unlabelled")
    node["status"]["capacity"]["nvidia.com/mig-1g.5gb"] = "7"
    real.client.create(node)

    result = run_cli("--kubeconfig", str(kubeconfig), "map")

    assert result.exit_code == 0
    assert f"node unlabelled: {NO_REPORT}" in result.stderr
    assert "No resources found." in result.stderr


def test_without_the_report_resource_every_gpu_node_says_why(
    run_cli: Run, real: SimCluster, kubeconfig: Path
) -> None:
    add_node(real, "gpu-a")  # no CRD installed: the LIST answers 404

    result = run_cli("--kubeconfig", str(kubeconfig), "map", "-A")

    assert result.exit_code == 0, result.stderr
    assert "node gpu-a: no agent report: the GPUNodeReport resource is not installed" in (
        result.stderr
    )


def test_a_named_node_that_does_not_exist_is_said_so(
    run_cli: Run, real: SimCluster, kubeconfig: Path
) -> None:
    api = api_for(real)
    add_node(real, "gpu-a")
    add_node(real, "gpu-b")
    for n, name in enumerate(("gpu-a", "gpu-b")):
        gpus = b.gpus(1, node=n)
        b.publish_node(api, name, gpus, [b.held(f"p{n}", [gpus[0].uuid])])

    result = run_cli("--kubeconfig", str(kubeconfig), "map", "gpu-b", "gpu-z", "-o", "json")

    assert [r["pod"] for r in result.json["items"]] == ["p1"]
    # as `kubectl get nodes gpu-b gpu-z`: what exists is shown, and the command fails
    assert result.exit_code == 1
    assert 'error: nodes "gpu-z" not found' in result.stderr


def test_a_selector_maps_only_the_matching_nodes(
    run_cli: Run, real: SimCluster, kubeconfig: Path
) -> None:
    api = api_for(real)
    add_node(real, "h100-1", pool="h100")
    add_node(real, "l4-1", pool="l4")
    for n, name in enumerate(("h100-1", "l4-1")):
        gpus = b.gpus(1, node=n)
        b.publish_node(api, name, gpus, [b.held(f"p{n}", [gpus[0].uuid])])
    add_node(real, "h100-2", pool="h100")
    start = clirequests.mark(real)

    result = run_cli("--kubeconfig", str(kubeconfig), "map", "-l", "pool=h100", "-o", "json")

    assert [r["node"] for r in result.json["items"]] == ["h100-1"]
    assert f"node h100-2: {NO_REPORT}" in result.stderr and "l4-1" not in result.stderr
    [nodes] = [r for r in clirequests.since(real, start) if r.startswith("list /api/v1/nodes?")]
    assert "labelSelector=pool%3Dh100" in nodes


def test_the_map_reads_reports_with_one_paginated_list_and_no_request_per_node(
    run_cli: Run, real: SimCluster, kubeconfig: Path
) -> None:
    api = api_for(real)
    names = [f"gpu-{n:02d}" for n in range(12)]
    for n, name in enumerate(names):
        add_node(real, name)
        gpus = b.gpus(2, node=n)
        b.publish_node(api, name, gpus, [b.held(f"p{n}", [gpus[0].uuid])])
    start = clirequests.mark(real)

    result = run_cli("--kubeconfig", str(kubeconfig), "map", "-A", "-o", "json")

    assert result.exit_code == 0, result.stderr
    assert sorted({r["node"] for r in result.json["items"]}) == names
    sent = clirequests.since(real, start)
    paths = [r.split()[1].split("?")[0] for r in sent]
    assert sorted(paths) == [
        "/api/v1/nodes",
        "/apis/kubectl-gpu.io/v1/gpunodereports",
        "/apis/resource.k8s.io",  # one discovery GET: which DRA version the server serves
        "/apis/resource.k8s.io/v1/resourceclaims",
    ], sent
    lists = [r for r in sent if not r.endswith(" /apis/resource.k8s.io")]
    assert all(r.startswith("list ") and "limit=" in r for r in lists)  # paginated LISTs
    assert [r.split()[0] for r in sent if r not in lists] == ["get"]  # nothing written
