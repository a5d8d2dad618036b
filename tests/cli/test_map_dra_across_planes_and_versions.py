"""`kubectl gpu map -A` where resource.k8s.io is served at v1beta2 or v1beta1 only (as 1.33 and
1.32 served it), or not at all, on real API servers (tests/kit/plane/drareleases.py): some
nodes served by the NVIDIA device plugin and others by the NVIDIA DRA driver, in one table and
one JSON shape, a PLANE column (wide), every DRA allocation resolved to its physical GPU (and MIG
parent), two claims sharing one GPU, a MIG partition chosen as a firstAvailable alternative with
its GPU's counters, and the sharing config in effect.

The DRA driver here is the project's stand-in (tests/kit/cluster/drastandin.py, with the
scheduler step in drascheduler.py), kept only for what NVIDIA's kubelet plugin v0.4.1 cannot
give: ResourceSlices at v1beta2 or v1beta1 (it writes v1 only), and consumable capacity
(`allowMultipleAllocations`, which it does not publish: the share-ID test, at v1). A server not
serving v1 runs no scheduler (Kubernetes' own watches v1), so the allocations are the stand-in
step's, written at the served version and validated by the real server. At v1, map reads what
NVIDIA's plugin published and prepared and the real scheduler allocated:
tests/cli/test_map_dra_claims_nvidias_plugin_prepared.py,
tests/cli/test_map_both_planes_on_the_simulated_cluster.py and (KEP-5004)
tests/cli/test_map_and_doctor_read_dra_allocations_by_the_real_scheduler.py."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kubectl_gpu import cluster
from tests.conftest import ROOT, CliResult
from tests.gpumap import reportbuilders as b
from tests.kit.cluster import drascheduler, drastandin
from tests.kit.cluster.drastandin import DraGpu, MigSlot
from tests.kit.kube import objects
from tests.kit.kube.client import KubeClient
from tests.kit.plane.drareleases import BETAS, ServedPlane, betas_on, serving

Run = Callable[..., CliResult]
Obj = dict[str, Any]
NS = "ml"
WHOLE = [b.uuid("GPU", 900 + i) for i in range(3)]
PARTITIONED = b.uuid("GPU", 950)
MIGS = [b.uuid("MIG", 951), b.uuid("MIG", 952)]
SCHEMA = json.loads((ROOT / "schemas" / "map-rows.v1.json").read_text("utf-8"))
TIME_SLICING = {
    "apiVersion": "resource.nvidia.com/v1beta1",
    "kind": "GpuConfig",
    "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}},
}


def dra_nodes() -> dict[str, list[DraGpu]]:
    return {
        "dra-1": [
            DraGpu(0, WHOLE[0]),
            DraGpu(1, WHOLE[1]),
            DraGpu(2, WHOLE[2], shareable=True),
        ],
        "dra-2": [
            DraGpu(
                0,
                PARTITIONED,
                migs=(MigSlot("3g.40gb", MIGS[0], 40, 42), MigSlot("1g.10gb", MIGS[1], 10, 14)),
            )
        ],
    }


def claim(name: str, requests: list[Obj], version: str, config: list[Obj] | None = None) -> Obj:
    devices: Obj = {"requests": requests}
    if config:
        devices["config"] = config
    return {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"devices": devices},
    }


def exact(name: str, cls: str, version: str, **fields: Any) -> Obj:
    body = {"deviceClassName": cls, **fields}
    return {"name": name, **body} if version == "v1beta1" else {"name": name, "exactly": body}


def claim_pod(client: KubeClient, name: str, node_name: str, claim_name: str) -> None:
    made = objects.pod(name, NS, node_name=node_name)
    made["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name}]
    made["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    client.create(made)


def recent(served: ServedPlane) -> bool:
    return betas_on(served.plane)


def build(served: ServedPlane) -> None:
    """A device-plugin node with an agent report, and two DRA nodes with claims allocated."""
    client, version = served.plane.client, served.version
    api = cluster.connect(str(served.plane.kubeconfig))
    b.install(api)
    client.create(b.node("dp-1"))
    gpus = b.gpus(1, node=7)
    b.publish_node(api, "dp-1", gpus, [b.held("legacy", [gpus[0].uuid])])
    nodes = dra_nodes() if recent(served) else {"dra-1": dra_nodes()["dra-1"]}
    for name in nodes:
        client.create(b.node(name, gpu=False))
    served.namespace(NS)
    drastandin.install(client, nodes, version)
    config = [{"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com",
                                               "parameters": TIME_SLICING}}]  # fmt: skip
    client.create(claim("train", [exact("gpu", "gpu.nvidia.com", version)], version, config))
    claim_pod(client, "train", "dra-1", "train")
    drascheduler.allocate(served.store)
    if not recent(served):
        return
    if version == "v1":  # extended resources served by DRA are v1 only (Kubernetes 1.34+)
        client.create(objects.pod("legacy-style", NS, node_name="dra-1", gpus=1))
        drascheduler.serve_extended_resource(served.store, NS, "legacy-style", version)
    capacity = {"capacity": {"requests": {"memory": "10Gi"}}}
    for name in ("share-a", "share-b") if version != "v1beta1" else ():  # consumable capacity
        client.create(claim(name, [exact("gpu", "gpu.nvidia.com", version, **capacity)], version))
        claim_pod(client, name, "dra-1", name)
        drascheduler.allocate(served.store)
    alternatives = [
        {"name": "whole", "deviceClassName": "gpu.nvidia.com"},
        {"name": "slice", "deviceClassName": "mig.nvidia.com"},
    ]
    client.create(claim("infer", [{"name": "gpu", "firstAvailable": alternatives}], version))
    claim_pod(client, "infer", "dra-2", "infer")
    drascheduler.allocate(served.store)


@pytest.fixture(scope="module")
def served(request: pytest.FixtureRequest) -> Iterator[ServedPlane]:
    """A plane serving resource.k8s.io at `request.param` only, built once for the module."""
    with serving(request.param) as plane:
        if request.param != "none":
            build(plane)
        yield plane


def needs_recent(served: ServedPlane) -> None:
    if not recent(served):
        pytest.skip(BETAS)


def map_json(run_cli: Run, served: ServedPlane) -> CliResult:
    return run_cli("--kubeconfig", str(served.plane.kubeconfig), "map", "-A", "-o", "json")


def rows_by_pod(result: CliResult) -> dict[str, Obj]:
    assert result.exit_code == 0, result.stderr
    jsonschema.validate(result.json, SCHEMA)
    return {r["pod"]: r for r in result.json["items"]}


@pytest.mark.parametrize("served", ["v1beta2", "v1beta1"], indirect=True)
def test_one_map_shows_both_planes_each_allocation_on_its_physical_gpu(
    run_cli: Run, served: ServedPlane
) -> None:
    mark = served.mark()

    rows = rows_by_pod(map_json(run_cli, served))

    assert rows["legacy"]["plane"] == "device-plugin" and rows["legacy"]["node"] == "dp-1"
    train = rows["train"]
    assert (train["plane"], train["node"], train["gpu_uuid"]) == ("dra", "dra-1", WHOLE[0])
    assert train["container"] == "main" and train["sharing"] == "TimeSlicing (Long)"
    assert f"/apis/resource.k8s.io/{served.version}/resourceclaims" in served.paths_since(mark)
    if not recent(served):
        return
    if served.version != "v1beta1":
        assert {rows[p]["gpu_uuid"] for p in ("share-a", "share-b")} == {WHOLE[2]}
    infer = rows["infer"]
    assert (infer["gpu_uuid"], infer["mig_uuid"], infer["mig_profile"]) == (
        PARTITIONED,
        MIGS[0],
        "3g.40gb",
    )
    assert infer["resource"] == "claim:infer/gpu/slice"  # the alternative the scheduler chose
    assert infer["counters"] == "memory 40Gi/80Gi, multiprocessors 42/98"


@pytest.mark.parametrize("served", ["v1"], indirect=True)
def test_two_claims_sharing_one_gpu_show_their_share_ids(run_cli: Run, served: ServedPlane) -> None:
    """Consumable capacity: NVIDIA's v0.4.1 publishes no `allowMultipleAllocations`, so the
    stand-in's shareable GPU stands in for a driver that does."""
    needs_recent(served)

    rows = rows_by_pod(map_json(run_cli, served))

    a, b_ = rows["share-a"], rows["share-b"]
    assert a["gpu_uuid"] == b_["gpu_uuid"] == WHOLE[2]
    assert a["share_id"] and b_["share_id"] and a["share_id"] != b_["share_id"]
    assert a["consumed"] == b_["consumed"] == "memory=10Gi"
    wide = run_cli("--kubeconfig", str(served.plane.kubeconfig), "map", "-A", "-o", "wide")
    assert f"{a['share_id']} memory=10Gi" in wide.stdout  # wide: IDs in full


@pytest.mark.parametrize("served", ["v1beta2"], indirect=True)
def test_wide_has_a_plane_column_and_shows_sharing(run_cli: Run, served: ServedPlane) -> None:
    kubeconfig = str(served.plane.kubeconfig)
    table = run_cli("--kubeconfig", kubeconfig, "map", "-A")
    wide = run_cli("--kubeconfig", kubeconfig, "map", "-A", "-o", "wide")

    assert table.exit_code == 0, table.stderr
    lines = wide.stdout.splitlines()
    assert lines[0].split()[:2] == ["NODE", "PLANE"]
    planes = {line.split()[0]: line.split()[1] for line in lines[1:]}
    dra = {"dra-1": "dra", "dra-2": "dra"} if recent(served) else {"dra-1": "dra"}
    assert planes == {"dp-1": "device-plugin", **dra}
    header, *rows = (line.split() for line in table.stdout.splitlines())
    assert "PLANE" not in header  # the default table shows a DRA device as `dra:…`
    devices = {r[0]: r[header.index("DEVICE")].startswith("dra:") for r in rows}
    assert devices == {node: plane == "dra" for node, plane in planes.items()}
    assert "SHARING" in wide.stdout.splitlines()[0]
    assert "TimeSlicing (Long)" in wide.stdout


@pytest.mark.parametrize("served", ["none"], indirect=True)
def test_a_server_without_dra_maps_the_device_plugin_nodes_alone(
    run_cli: Run, served: ServedPlane
) -> None:
    api = cluster.connect(str(served.plane.kubeconfig))
    b.install(api)
    served.plane.client.create(b.node("dp-1"))
    gpus = b.gpus(1, node=7)
    b.publish_node(api, "dp-1", gpus, [b.held("legacy", [gpus[0].uuid])])
    mark = served.mark()

    rows = rows_by_pod(map_json(run_cli, served))

    assert list(rows) == ["legacy"]
    assert not [p for p in served.paths_since(mark) if "resourceclaims" in p]


@pytest.mark.parametrize("served", ["v1beta1"], indirect=True)
def test_real_kubectl_reads_the_simulated_driver_at_the_served_version(
    served: ServedPlane,
) -> None:
    def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        # a discovery cache of this plane's own: kubectl keys its cache by host:port, and an
        # earlier plane on the same port that served resource.k8s.io/v1 would be believed
        cache = served.plane.kubeconfig.parent / "kubectl-discovery-cache"
        return subprocess.run(
            [str(served.plane.kubectl), "--kubeconfig", str(served.plane.kubeconfig),
             f"--cache-dir={cache}", *args],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    slices = kubectl("get", "resourceslices", "-o", "json")
    claims = kubectl("get", "resourceclaims", "-n", NS, "-o", "json")

    assert slices.returncode == 0, slices.stderr
    items = json.loads(slices.stdout)["items"]
    assert {s["apiVersion"] for s in items} == {f"resource.k8s.io/{served.version}"}
    assert {s["spec"]["nodeName"] for s in items} == set(
        dra_nodes() if recent(served) else ["dra-1"]
    )
    devices = items[0]["spec"]["devices"]
    assert ("basic" in devices[0]) == (served.version == "v1beta1")
    assert claims.returncode == 0, claims.stderr
    allocated = {
        c["metadata"]["name"]: c["status"]["allocation"]["devices"]["results"][0]["device"]
        for c in json.loads(claims.stdout)["items"]
    }
    assert allocated["train"] == "gpu-0"
    if recent(served):
        assert allocated["infer"] == "gpu-0-mig-3g40gb-0"


@pytest.mark.parametrize("served", ["v1beta2"], indirect=True)
def test_a_user_who_may_not_read_claims_gets_the_device_plugin_plane_and_a_warning(
    run_cli: Run, served: ServedPlane, tmp_path: Path
) -> None:
    denied = served.plane.user_denied(
        "no-claims", tmp_path / "kubeconfig", {("list", "resourceclaims", "resource.k8s.io")}
    )

    result = run_cli("--kubeconfig", str(denied), "map", "-A", "-o", "json")

    assert list(rows_by_pod(result)) == ["legacy"]
    assert "DRA allocations left out of the map" in result.stderr
    assert "forbidden" in result.stderr.lower()
