"""`kubectl gpu map --checkpoint` as a user drives it: a copied checkpoint (file or stdin), an
optional pod list, every output format, and the exit codes of what goes wrong."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.conftest import DATA, ROOT, CliResult
from tests.kit.node import kubelet as stand_in
from tests.kit.node.kubelet import Allocatable, Container, Devices, Pod

Run = Callable[..., CliResult]
MINIKUBE = DATA / "checkpoints" / "minikube-1gpu.json"  # real; tests/data/checkpoints/README.md
MINIKUBE_GPU = "GPU-11ba558d-3437-2335-2fd8-a78c8502f87f"
MINIKUBE_POD = "f2b9f4e5-ba3b-418e-ab8c-c1751a0619d8"
TIME_SLICED = DATA / "checkpoints" / "time-sliced-4x.json"
SLICED_GPU = "GPU-4f2c7e1a-9b3d-4c8e-a1f0-6d5b2e8c9a17"
MIG_A = "MIG-6e1b7c2a-4d3f-5a8e-9b0c-1f2d3e4a5b6c"
LEGACY_PARENT = "GPU-8a1d5c3e-2f7b-4d9a-b6e4-0c3f9a2d7e15"
TABLE_HEADER = "NODE GPU UUID DEVICE POD".split()  # fits 120 columns
WIDE_HEADER = (
    "NODE PLANE GPU MODEL UUID DEVICE MIG PROFILE GI/CI DEVICE-ID RESOURCE REPLICA POD "
    "CONTAINER SHARING SHARE COUNTERS SOURCE"
).split()
SCHEMA = json.loads((ROOT / "schemas" / "map-rows.v1.json").read_text())


def table(result: CliResult) -> list[list[str]]:
    return [line.split() for line in result.stdout.splitlines()]


def rows_of(result: CliResult) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.stderr
    jsonschema.validate(result.json, SCHEMA)
    rows: list[dict[str, Any]] = result.json["items"]
    return rows


def write_checkpoint(tmp_path: Path, pods: list[Pod], registered: Allocatable) -> str:
    document = stand_in.checkpoint_document(
        stand_in.checkpoint_entries(pods), stand_in.registered_devices(registered)
    )
    path = tmp_path / "kubelet_internal_checkpoint"
    path.write_text(stand_in.checkpoint_text(document))
    return str(path)


def pod_list(tmp_path: Path, pods: Any, node: str = "gpu-node-1") -> str:
    items = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": p.name, "namespace": p.namespace, "uid": p.pod_uid},
            "spec": {"nodeName": node, "containers": [{"name": c.name} for c in p.containers]},
        }
        for p in pods
    ]
    path = tmp_path / "pods.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return str(path)


# --- the Done-means cases -------------------------------------------------------------------------


def test_the_minikube_checkpoint_shows_its_gpu_pod_and_container(run_cli: Run) -> None:
    result = run_cli("map", "--checkpoint", str(MINIKUBE))

    assert result.exit_code == 0, result.stderr
    header, row = table(result)
    assert header == TABLE_HEADER
    cells = dict(zip(header, row, strict=True))
    assert cells["UUID"] == "GPU-11ba558d" and cells["POD"] == MINIKUBE_POD
    assert max(len(line) for line in result.stdout.splitlines()) <= 120
    assert (cells["GPU"], cells["DEVICE"]) == ("<none>", "gpu")
    assert "warning" not in result.stderr  # NVIDIA_VISIBLE_DEVICES in AllocResp agrees


def test_an_alloc_resp_that_disagrees_is_warned_about(run_cli: Run, tmp_path: Path) -> None:
    document = json.loads(MINIKUBE.read_text())
    other = stand_in.nvidia_envvar_response([SLICED_GPU])
    entry = document["Data"]["PodDeviceEntries"][0]
    entry["AllocResp"] = base64.b64encode(stand_in.encode_alloc_resp(other)).decode()
    path = tmp_path / "cp.json"
    path.write_text(json.dumps(document))

    result = run_cli("map", "--checkpoint", str(path))

    assert result.exit_code == 0
    assert "[map.alloc-resp-disagrees]" in result.stderr and SLICED_GPU in result.stderr


def test_wide_shows_full_uuids_and_the_source(run_cli: Run) -> None:
    result = run_cli("map", "--checkpoint", str(MINIKUBE), "-o", "wide")

    header, row = table(result)
    assert header == WIDE_HEADER
    cells = dict(zip(header, row, strict=True))
    assert cells["UUID"] == cells["DEVICE-ID"] == MINIKUBE_GPU
    assert cells["SOURCE"] == "checkpoint"


def test_json_is_a_flat_list_of_rows_with_nulls_for_the_unknown(run_cli: Run) -> None:
    (row,) = rows_of(run_cli("map", "--checkpoint", str(MINIKUBE), "-o", "json"))

    assert row["gpu_uuid"] == row["device_id"] == MINIKUBE_GPU
    assert (row["pod_uid"], row["container"], row["resource"]) == (
        MINIKUBE_POD,
        "cuda",
        "nvidia.com/gpu",
    )
    assert (row["gpu_index"], row["gpu_model"], row["namespace"], row["pod"], row["node"]) == (
        None,
        None,
        None,
        None,
        None,
    )
    assert (row["mig_uuid"], row["replica"], row["source"]) == (None, None, "checkpoint")


def test_yaml_carries_the_same_rows_as_json(run_cli: Run) -> None:
    as_json = run_cli("map", "--checkpoint", str(TIME_SLICED), "-o", "json").json
    as_yaml = yaml.safe_load(run_cli("map", "--checkpoint", str(TIME_SLICED), "-o", "yaml").stdout)

    assert as_yaml == as_json and len(as_json["items"]) == 4


def test_stdin_reads_like_a_file(run_cli: Run) -> None:
    from_file = run_cli("map", "--checkpoint", str(MINIKUBE), "-o", "json")
    from_stdin = run_cli("map", "--checkpoint", "-", "-o", "json", input=MINIKUBE.read_bytes())

    assert from_stdin.exit_code == 0, from_stdin.stderr
    assert from_stdin.json == from_file.json


def test_a_pre_1_20_checkpoint_maps_both_gpus(run_cli: Run) -> None:
    path = DATA / "checkpoints" / "pre-1.20-2gpu.json"

    rows = rows_of(run_cli("map", "--checkpoint", str(path), "-o", "json"))

    assert sorted((r["gpu_uuid"], r["pod_uid"]) for r in rows) == [
        (LEGACY_PARENT, "6e2f8a14-3b7c-11eb-9d5e-0242ac110002"),
        ("GPU-e3b9f1a7-6c2d-4e8b-9a5f-7d1c4b8e2a63", "6e31c9a2-3b7c-11eb-9d5e-0242ac110002"),
    ]


def test_three_time_sliced_pods_resolve_to_their_one_gpu(run_cli: Run) -> None:
    rows = rows_of(run_cli("map", "--checkpoint", str(TIME_SLICED), "-o", "json"))

    assert {r["gpu_uuid"] for r in rows} == {SLICED_GPU}
    assert [r["replica"] for r in rows] == [0, 1, 2, 3]
    assert len({r["pod_uid"] for r in rows}) == 3
    assert [r["device_id"] for r in rows] == [f"{SLICED_GPU}::{n}" for n in range(4)]


def test_time_sliced_table_shows_short_replica_ids(run_cli: Run) -> None:
    result = run_cli("map", "--checkpoint", str(TIME_SLICED))

    header, *rows = table(result)
    assert [r[header.index("UUID")] for r in rows] == ["GPU-4f2c7e1a"] * 4
    assert [r[header.index("DEVICE")] for r in rows] == ["::0", "::1", "::2", "::3"]
    wide, *wide_rows = table(run_cli("map", "--checkpoint", str(TIME_SLICED), "-o", "wide"))
    assert [r[wide.index("REPLICA")] for r in wide_rows] == ["0", "1", "2", "3"]


def test_mig_ids_show_their_mig_device_and_profile(run_cli: Run, tmp_path: Path) -> None:
    legacy = f"MIG-{LEGACY_PARENT}/7/0"
    containers = (
        Container("small", (Devices("nvidia.com/mig-1g.5gb", (MIG_A,)),)),
        Container("legacy", (Devices("nvidia.com/mig-1g.5gb", (f"{legacy}::1",)),)),
    )
    pods = [Pod("infer", "serving", containers, uid="uid-mig")]
    path = write_checkpoint(tmp_path, pods, Allocatable())

    rows = {r["container"]: r for r in rows_of(run_cli("map", "--checkpoint", path, "-o", "json"))}

    assert (rows["small"]["mig_uuid"], rows["small"]["gpu_uuid"]) == (MIG_A, None)
    assert rows["small"]["mig_profile"] == "1g.5gb"
    old = rows["legacy"]
    assert (old["gpu_uuid"], old["mig_uuid"], old["replica"]) == (LEGACY_PARENT, legacy, 1)
    assert (old["gpu_instance"], old["compute_instance"]) == (7, 0)
    header, *lines = table(run_cli("map", "--checkpoint", path))
    assert sorted(line[header.index("DEVICE")] for line in lines) == ["1g.5gb", "1g.5gb::1"]
    header, *lines = table(run_cli("map", "--checkpoint", path, "-o", "wide"))
    assert sorted(line[header.index("MIG")] for line in lines) == [MIG_A, legacy]


# --- naming pods, selecting rows ------------------------------------------------------------------


def test_a_pod_list_names_the_pods_and_the_node(run_cli: Run, tmp_path: Path) -> None:
    pods, _ = stand_in.time_sliced_node()

    rows = rows_of(
        run_cli(
            "map",
            "--checkpoint",
            str(TIME_SLICED),
            "--pods",
            pod_list(tmp_path, pods),
            "-o",
            "json",
        )
    )

    assert [(r["namespace"], r["pod"]) for r in rows] == [
        ("ml", "llm-a-7d9f8b6c5-x2k4q"),
        ("ml", "llm-b-7d9f8b6c5-m7p2z"),
        ("ml", "notebook-0"),
        ("ml", "notebook-0"),
    ]
    assert {r["node"] for r in rows} == {"gpu-node-1"}


def test_the_table_names_pods_namespace_slash_name(run_cli: Run, tmp_path: Path) -> None:
    pods, _ = stand_in.time_sliced_node()
    args = ["--pods", pod_list(tmp_path, pods), "--node-name", "n7"]

    result = run_cli("map", "--checkpoint", str(TIME_SLICED), *args)

    header, *rows = table(result)
    assert [r[header.index("POD")] for r in rows][-1] == "ml/notebook-0"
    assert {r[header.index("NODE")] for r in rows} == {"n7"}


def test_a_pod_missing_from_the_list_is_a_stale_warning(run_cli: Run, tmp_path: Path) -> None:
    pods, _ = stand_in.time_sliced_node()

    result = run_cli(
        "map", "--checkpoint", str(TIME_SLICED), "--pods", pod_list(tmp_path, pods[:2])
    )

    assert result.exit_code == 0
    assert "[map.stale-checkpoint-entry]" in result.stderr
    assert pods[2].pod_uid in result.stderr


def test_pod_and_namespace_select_rows(run_cli: Run, tmp_path: Path) -> None:
    pods, _ = stand_in.time_sliced_node()
    listed = pod_list(tmp_path, pods)
    base = ["map", "--checkpoint", str(TIME_SLICED), "--pods", listed, "-o", "json"]

    by_name = run_cli(*base, "--pod", "notebook-0").json["items"]
    by_uid = run_cli(
        "map", "--checkpoint", str(TIME_SLICED), "--pod", pods[0].pod_uid, "-o", "json"
    )
    other_namespace = run_cli(*base, "-n", "kube-system").json["items"]

    assert [r["replica"] for r in by_name] == [2, 3]
    assert [r["replica"] for r in by_uid.json["items"]] == [0]
    assert other_namespace == []


def test_free_lists_the_replicas_no_pod_holds(run_cli: Run, tmp_path: Path) -> None:
    pods, allocatable = stand_in.time_sliced_node()
    path = write_checkpoint(tmp_path, list(pods[:2]), allocatable)

    rows = rows_of(run_cli("map", "--checkpoint", path, "--free", "-o", "json"))

    assert [(r["device_id"], r["pod_uid"], r["container"]) for r in rows] == [
        (f"{SLICED_GPU}::2", None, None),
        (f"{SLICED_GPU}::3", None, None),
    ]


def test_a_single_pod_document_also_names_pods(run_cli: Run, tmp_path: Path) -> None:
    document = {
        "kind": "Pod",
        "metadata": {"name": "cuda-vectoradd", "namespace": "default", "uid": MINIKUBE_POD},
    }
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(document))

    (row,) = rows_of(
        run_cli("map", "--checkpoint", str(MINIKUBE), "--pods", str(path), "-o", "json")
    )

    assert (row["namespace"], row["pod"]) == ("default", "cuda-vectoradd")


# --- what goes wrong ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["truncated", "not-json", "wrong-shape"])
def test_a_corrupt_checkpoint_warns_naming_the_file_and_exits_1(
    run_cli: Run, tmp_path: Path, kind: Any
) -> None:
    path = tmp_path / "cp.json"
    path.write_bytes(stand_in.corrupt_checkpoint_bytes(kind, TIME_SLICED.read_text()))

    result = run_cli("map", "--checkpoint", str(path), "-o", "json")

    assert result.exit_code == 1
    assert f"warning: cannot read kubelet's checkpoint {path}: " in result.stderr
    assert "error: no map" in result.stderr
    assert result.stdout == ""


def test_a_missing_checkpoint_file_exits_1(run_cli: Run, tmp_path: Path) -> None:
    result = run_cli("map", "--checkpoint", str(tmp_path / "nope.json"))

    assert result.exit_code == 1 and "nope.json: no such file" in result.stderr


def test_an_empty_checkpoint_is_an_empty_map(run_cli: Run, tmp_path: Path) -> None:
    path = write_checkpoint(tmp_path, [], Allocatable())

    result = run_cli("map", "--checkpoint", path)

    assert result.exit_code == 0 and result.stdout == ""
    assert "No resources found." in result.stderr


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (("node1",), "NODE and -l select nodes"),
        (("-n", "ml"), "-n needs --pods offline"),
        (("--free", "--pod", "x"), "cannot be combined with --pod"),
        (("--pods", "-"), "stdin ('-') can be read only once"),
    ],
)
def test_contradictory_flags_are_usage_errors(
    run_cli: Run, args: tuple[str, ...], problem: str
) -> None:
    checkpoint = "-" if "-" in args else str(MINIKUBE)

    result = run_cli("map", "--checkpoint", checkpoint, *args)

    assert result.exit_code == 2 and problem in result.stderr


def test_a_pod_list_that_is_not_json_exits_1_with_a_hint(run_cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "pods.yaml"
    path.write_text("apiVersion: v1\nkind: List\n")

    result = run_cli("map", "--checkpoint", str(MINIKUBE), "--pods", str(path))

    assert result.exit_code == 1
    assert (
        "pods.yaml is not JSON" in result.stderr and "kubectl get pods -A -o json" in result.stderr
    )


def test_help_explains_both_the_cluster_and_the_offline_map(run_cli: Run) -> None:
    result = run_cli("map", "--help")

    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert "GPUNodeReport each node's agent publishes" in text
    assert "--checkpoint" in text and "checksum is not verified" in text


@pytest.mark.parametrize("placement", ["before", "after"])
def test_verbosity_flag_works_before_or_after_the_subcommand(run_cli: Run, placement: str) -> None:
    checkpoint = str(DATA / "checkpoints" / "minikube-1gpu.json")
    args = ["map", "--checkpoint", checkpoint]
    result = run_cli(*(["-v", "1", *args] if placement == "before" else [*args, "-v", "1"]))
    assert result.exit_code == 0
    assert "checksum not verified" in result.stderr
    quiet = run_cli(*args)
    assert "checksum not verified" not in quiet.stderr
