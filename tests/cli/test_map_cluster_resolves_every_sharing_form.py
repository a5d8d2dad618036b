"""`kubectl gpu map` from the cluster: the agents' reports (built and published as the agent
does) and DRA claims resolve every advertised device to its physical GPU, MIG device, replica
and pod container, in every output format.

On the real control plane: the real server serves (and validates) the report CRD; the DRA
claims are made by the real ResourceClaim controller from the pods' templates and allocated by
the real scheduler from the driver's slice."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kubectl_gpu import cluster
from tests.conftest import ROOT, CliResult
from tests.gpumap import reportbuilders as b
from tests.kit.cluster import SimCluster, drachart
from tests.kit.plane.plane import wait_for

Run = Callable[..., CliResult]
SCHEMA = json.loads((ROOT / "schemas" / "map-rows.v1.json").read_text())


@pytest.fixture
def api(real: SimCluster) -> cluster.Api:
    """The report CRD installed, as the agent's manifests do."""
    api = cluster.connect(str(real.kubeconfig))
    b.install(api)
    return api


def rows_of(result: CliResult) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.stderr
    jsonschema.validate(result.json, SCHEMA)
    rows: list[dict[str, Any]] = result.json["items"]
    return rows


def pick(rows: list[dict[str, Any]], *keys: str) -> list[tuple[Any, ...]]:
    return [tuple(r[k] for k in keys) for r in rows]


def test_whole_gpus_show_index_model_uuid_pod_and_container(
    run_cli: Run, api: cluster.Api, real: SimCluster, kubeconfig: Path
) -> None:
    b.add_node(real, "gpu-a")
    gpus = b.gpus(2)
    b.publish_node(api, "gpu-a", gpus, [b.held("train", [gpus[1].uuid])])

    rows = rows_of(run_cli("--kubeconfig", str(kubeconfig), "map", "-A", "-o", "json"))

    assert pick(rows, "node", "gpu_index", "gpu_model", "gpu_uuid", "namespace", "pod") == [
        ("gpu-a", 1, b.L4, gpus[1].uuid, "ml", "train")
    ]
    assert rows[0]["container"] == "cuda" and rows[0]["source"] == "podresources"
    assert rows[0]["observed_at"] == "2026-05-01T12:00:00Z"


def test_the_table_shows_short_uuids_and_the_report_age(
    run_cli: Run, api: cluster.Api, real: SimCluster, kubeconfig: Path
) -> None:
    b.add_node(real, "gpu-a")
    gpus = b.gpus(1)
    b.publish_node(api, "gpu-a", gpus, [b.held("train", [gpus[0].uuid])])

    result = run_cli("--kubeconfig", str(kubeconfig), "map")
    header, row = (line.split() for line in result.stdout.splitlines())

    assert result.exit_code == 0, result.stderr
    assert header[-1] == "AGE" and header[0] == "NODE"
    assert "GPU-00000000" in row and gpus[0].uuid not in row
    assert re.fullmatch(r"[0-9]+[smhdy]([0-9]+[smhd])?", row[-1]), row[-1]
    wide = run_cli("--kubeconfig", str(kubeconfig), "map", "-o", "wide")
    assert gpus[0].uuid in wide.stdout


def test_three_time_sliced_pods_resolve_to_their_one_gpu(
    run_cli: Run, api: cluster.Api, real: SimCluster, kubeconfig: Path
) -> None:
    b.add_node(real, "gpu-a")
    [gpu] = b.gpus(1)
    replicas = [f"{gpu.uuid}::{n}" for n in range(4)]
    held = [b.held(f"p{n}", [replicas[n]]) for n in range(3)]
    b.publish_node(api, "gpu-a", [gpu], held, b.healthy({"nvidia.com/gpu": replicas}))

    rows = rows_of(run_cli("--kubeconfig", str(kubeconfig), "map", "-o", "json"))
    free = rows_of(run_cli("--kubeconfig", str(kubeconfig), "map", "--free", "-o", "json"))

    assert pick(rows, "gpu_uuid", "gpu_index", "replica", "pod") == [
        (gpu.uuid, 0, 0, "p0"),
        (gpu.uuid, 0, 1, "p1"),
        (gpu.uuid, 0, 2, "p2"),
    ]
    assert pick(free, "device_id", "pod", "container") == [(replicas[3], None, None)]


def test_mig_mixed_devices_resolve_to_their_parent_gpu_and_profile(
    run_cli: Run, api: cluster.Api, real: SimCluster, kubeconfig: Path
) -> None:
    b.add_node(real, "gpu-a")
    gpu = b.mig_gpu(3, ["3g.20gb", "1g.5gb"])
    big, small = gpu.mig_devices
    held = [
        b.held("big", [big.uuid], "nvidia.com/mig-3g.20gb"),
        b.held("small", [small.uuid], "nvidia.com/mig-1g.5gb"),
    ]
    b.publish_node(api, "gpu-a", [gpu], held)

    rows = rows_of(run_cli("--kubeconfig", str(kubeconfig), "map", "-o", "json"))

    assert pick(rows, "pod", "gpu_index", "gpu_uuid", "mig_uuid", "mig_profile") == [
        ("big", 3, gpu.uuid, big.uuid, "3g.20gb"),
        ("small", 3, gpu.uuid, small.uuid, "1g.5gb"),
    ]
    assert pick(rows, "gpu_instance", "compute_instance") == [(1, 0), (2, 0)]


def test_time_sliced_mig_devices_keep_parent_profile_and_replica(
    run_cli: Run, api: cluster.Api, real: SimCluster, kubeconfig: Path
) -> None:
    b.add_node(real, "gpu-a")
    gpu = b.mig_gpu(0, ["1g.5gb"])
    [mig] = gpu.mig_devices
    resource = "nvidia.com/mig-1g.5gb.shared"
    held = [b.held(f"p{n}", [f"{mig.uuid}::{n}"], resource) for n in (0, 1)]
    b.publish_node(api, "gpu-a", [gpu], held)

    rows = rows_of(run_cli("--kubeconfig", str(kubeconfig), "map", "-o", "json"))

    assert pick(rows, "device_id", "gpu_uuid", "mig_uuid", "mig_profile", "replica", "pod") == [
        (f"{mig.uuid}::0", gpu.uuid, mig.uuid, "1g.5gb", 0, "p0"),
        (f"{mig.uuid}::1", gpu.uuid, mig.uuid, "1g.5gb", 1, "p1"),
    ]


def test_an_unhealthy_gpu_held_by_a_pod_is_warned_about_with_its_node(
    run_cli: Run, api: cluster.Api, real: SimCluster, kubeconfig: Path
) -> None:
    b.add_node(real, "gpu-a")
    gpus = b.gpus(2)
    held = [b.held("train", [gpus[0].uuid])]
    # GetAllocatableResources lists healthy devices only: GPU 0 dropped out (XID, say)
    b.publish_node(api, "gpu-a", gpus, held, b.healthy({"nvidia.com/gpu": [gpus[1].uuid]}))

    result = run_cli("--kubeconfig", str(kubeconfig), "map", "-o", "json")
    free = rows_of(run_cli("--kubeconfig", str(kubeconfig), "map", "--free", "-o", "json"))

    assert pick(rows_of(result), "gpu_uuid", "pod") == [(gpus[0].uuid, "train")]
    assert f"node gpu-a: {gpus[0].uuid} held by pod ml/train" in result.stderr
    assert "[map.device-unhealthy]" in result.stderr
    assert pick(free, "gpu_uuid") == [(gpus[1].uuid,)]


def test_dra_claims_resolve_through_resource_slices_to_gpus_and_mig_devices(
    run_cli: Run, api: cluster.Api, real: SimCluster, kubeconfig: Path
) -> None:
    b.add_node(real, "dra-a")
    gpu = b.mig_gpu(2, ["1g.5gb"])
    whole = b.gpus(1, b.A100, node=7)[0]
    [mig] = gpu.mig_devices
    b.publish_node(api, "dra-a", [whole, gpu], [])  # the agent knows NVML indices
    client = real.client
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    for obj in drachart.device_classes("v1"):
        client.create(obj)
    client.create(
        b.resource_slice(
            "dra-a",
            [
                b.gpu_device("gpu-0", whole.uuid),
                b.mig_device("gpu-2-mig-1g5gb-19-0", mig.uuid, gpu.uuid, "1g.5gb"),
            ],
        )
    )
    for pod, cls, container in (("train", "gpu", "trainer"), ("infer", "mig", "server")):
        client.create(claim_template(pod, f"{cls}.nvidia.com"))
        client.create(claim_pod(pod, "dra-a", container))
    real.settle()
    made = {pod: claim_of(real, pod) for pod in ("train", "infer")}

    rows = rows_of(run_cli("--kubeconfig", str(kubeconfig), "map", "-A", "-o", "json"))

    assert pick(rows, "pod", "container", "gpu_index", "gpu_uuid", "mig_uuid", "mig_profile") == [
        ("train", "trainer", 0, whole.uuid, None, None),
        ("infer", "server", 2, gpu.uuid, mig.uuid, "1g.5gb"),
    ]
    assert pick(rows, "source", "device_id", "resource") == [
        ("dra", "gpu.nvidia.com/dra-a/gpu-0", f"claim:{made['train']}/gpu"),
        ("dra", "gpu.nvidia.com/dra-a/gpu-2-mig-1g5gb-19-0", f"claim:{made['infer']}/gpu"),
    ]
    assert {r["node"] for r in rows} == {"dra-a"} and rows[0]["observed_at"] is None


def claim_template(name: str, device_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}},
    }  # fmt: skip


def claim_pod(name: str, node: str, container: str) -> dict[str, Any]:
    """A pod whose container uses a claim made from template `name` (a sidecar uses none)."""
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": name}],
            "containers": [
                {"name": container, "image": "cuda:12", "resources": {"claims": [{"name": "gpu"}]}},
                {"name": "sidecar", "image": "busybox"},
            ],
        },
    }  # fmt: skip


def claim_of(real: SimCluster, pod: str) -> str:
    """The claim the ResourceClaim controller made for `pod`, once the scheduler allocated it
    and KWOK runs the pod."""

    def made() -> str:
        found = real.client.get("pods", pod, "ml")
        statuses = (found.get("status") or {}).get("resourceClaimStatuses") or []
        running = (found.get("status") or {}).get("phase") == "Running"
        return str(statuses[0].get("resourceClaimName") or "") if statuses and running else ""

    return str(wait_for(f"{pod}'s claim to be allocated and the pod to run", made))


def test_namespace_and_pod_select_rows(
    run_cli: Run, api: cluster.Api, real: SimCluster, kubeconfig: Path
) -> None:
    b.add_node(real, "gpu-a")
    gpus = b.gpus(2)
    held = [b.held("train", [gpus[0].uuid]), b.held("web", [gpus[1].uuid], namespace="prod")]
    b.publish_node(api, "gpu-a", gpus, held)
    base = ("--kubeconfig", str(kubeconfig), "map", "-o", "json")

    in_prod = rows_of(run_cli(*base, "-n", "prod"))
    by_pod = rows_of(run_cli(*base, "--pod", "ml/train"))

    assert pick(in_prod, "pod") == [("web",)]
    assert pick(by_pod, "pod") == [("train",)]
    assert len(rows_of(run_cli(*base, "-n", "prod", "-A"))) == 2


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (("--pods", "pods.json"), "--pods can only be used with --checkpoint"),
        (("--node-name", "x"), "--node-name can only be used with --checkpoint"),
        (("--free", "--pod", "x"), "cannot be combined with --pod"),
    ],
)
def test_offline_flags_are_usage_errors_against_the_cluster(
    run_cli: Run, args: tuple[str, ...], problem: str, tmp_path: Path
) -> None:
    # refused before any cluster is read: the kubeconfig need not exist
    result = run_cli("--kubeconfig", str(tmp_path / "kubeconfig"), "map", *args)

    assert result.exit_code == 2 and problem in result.stderr


def test_the_default_table_fits_120_columns_and_wide_keeps_the_rest(
    run_cli: Run, api: cluster.Api, real: SimCluster, kubeconfig: Path
) -> None:
    # A node as platform teams run them: 8 H100s, two time-sliced 4 ways, one in MIG, the rest
    # whole; pods with the names Deployments and StatefulSets give them.
    b.add_node(real, "ip-10-0-12-34.ec2.internal")
    plain = b.gpus(7, b.A100)
    whole, sliced = plain[:5], plain[5:]
    mig = b.mig_gpu(7, ["3g.40gb", "2g.20gb", "1g.10gb"])
    replicas = [f"{g.uuid}::{n}" for g in sliced for n in range(4)]
    held = [b.held(f"llama-finetune-7b-worker-{i}", [g.uuid], namespace="research-ml")
            for i, g in enumerate(whole)]  # fmt: skip
    held += [
        b.held(f"inference-server-6d8f7b9c4-x{n}kq", [r], namespace="serving")
        for n, r in enumerate(replicas)
    ]
    held += [
        b.held(f"jupyter-notebook-{n}", [m.uuid], f"nvidia.com/mig-{m.profile}", "notebooks")
        for n, m in enumerate(mig.mig_devices)
    ]
    b.publish_node(api, "ip-10-0-12-34.ec2.internal", [*plain, mig], held)

    table = run_cli("--kubeconfig", str(kubeconfig), "map", "-A")
    wide = run_cli("--kubeconfig", str(kubeconfig), "map", "-A", "-o", "wide")

    assert table.exit_code == 0, table.stderr
    lines = table.stdout.splitlines()
    assert len(lines) == 1 + 5 + 8 + 3
    assert max(len(line) for line in lines) <= 120, "\n".join(lines)
    cells = [line.split() for line in lines]
    assert cells[0] == "NODE GPU UUID DEVICE POD AGE".split()
    assert [(c[1], c[3], c[4]) for c in cells[1:]] == [
        *((str(i), "gpu", f"research-ml/llama-finetune-7b-worker-{i}") for i in range(5)),
        *((str(5 + n // 4), f"::{n % 4}", f"serving/inference-server-6d8f7b9c4-x{n}kq")
          for n in range(8)),
        *(("7", p, f"notebooks/jupyter-notebook-{n}")
          for n, p in enumerate(["3g.40gb", "2g.20gb", "1g.10gb"])),
    ]  # fmt: skip
    header = wide.stdout.splitlines()[0].split()
    for column in ("PLANE", "MODEL", "MIG", "PLACEMENT", "DEVICE-ID", "REPLICA", "CONTAINER"):
        assert column in header


def test_the_tree_draws_mig_devices_in_placement_order_and_the_free_ones(
    run_cli: Run, api: cluster.Api, real: SimCluster, kubeconfig: Path
) -> None:
    from kubectl_gpu.gpumap import join, report
    from kubectl_gpu.workflows import reports

    b.add_node(real, "gpu-a")
    # GI IDs in the order the instances were made, not where they sit on the GPU
    placed = [("3g.40gb", 1, 4, 4), ("2g.20gb", 2, 0, 2), ("1g.10gb", 5, 2, 1),
              ("1g.10gb", 6, 3, 1)]  # fmt: skip
    migs = tuple(
        report.MigInstance(b.uuid("MIG", gi), profile, gi, 0, report.Placement(start, size))
        for profile, gi, start, size in placed
    )
    a100 = report.InventoryGpu(0, b.uuid("GPU", 0), b.A100, 0, 81920, "MIG_ENABLED", migs)
    l4 = b.gpus(2, b.L4)[1]
    replicas = [f"{l4.uuid}::{n}" for n in range(4)]
    held = [
        b.held("notebook-0", [migs[1].uuid], "nvidia.com/mig-2g.20gb", "notebooks"),
        b.held("notebook-1", [migs[3].uuid], "nvidia.com/mig-1g.10gb", "notebooks"),
        b.held("infer-x0kq", [replicas[0]], namespace="serving"),
        b.held("infer-x2kq", [replicas[2]], namespace="serving"),
    ]
    healthy = b.healthy({
        "nvidia.com/mig-3g.40gb": [migs[0].uuid], "nvidia.com/mig-2g.20gb": [migs[1].uuid],
        "nvidia.com/mig-1g.10gb": [migs[2].uuid, migs[3].uuid], "nvidia.com/gpu": replicas,
    })  # fmt: skip
    sources = join.NodeSources(podresources=tuple(held), allocatable=healthy)
    reports.publish(api, report.build("gpu-a", [a100, l4], sources, b.NOW), None)

    result = run_cli("--kubeconfig", str(kubeconfig), "map", "-A", "--tree")

    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        "gpu-a",
        "+-- GPU 0 NVIDIA A100-SXM4-40GB GPU-00000000: 2 held, 2 free",
        "|   +-- 2g.20gb @0:2",
        "|   |   `-- notebooks/notebook-0 (cuda)",
        "|   +-- 1g.10gb @2:1 free",
        "|   +-- 1g.10gb @3:1",
        "|   |   `-- notebooks/notebook-1 (cuda)",
        "|   `-- 3g.40gb @4:4 free",
        "`-- GPU 1 NVIDIA L4 GPU-00000001: 2 held, 2 free",
        "    +-- ::0",
        "    |   `-- serving/infer-x0kq (cuda)",
        "    +-- ::1 free",
        "    +-- ::2",
        "    |   `-- serving/infer-x2kq (cuda)",
        "    `-- ::3 free",
    ]
    refused = run_cli("--kubeconfig", str(kubeconfig), "map", "--tree", "-o", "json")
    assert refused.exit_code == 2 and "cannot be combined with --free or -o json" in (
        refused.stderr
    )
