"""`kubelet.read_checkpoint`: every real and generated checkpoint reads, in either format, with
AllocResp decoded; what kubelet would choke on is a warning naming the file, never a crash."""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from kubectl_gpu import kubelet
from kubectl_gpu.gpumap.allocations import DeviceSpec, Mount, Source
from tests.conftest import DATA
from tests.kit.node import kubelet as stand_in
from tests.kit.node.kubelet import Allocatable, Container, Devices, FakeKubelet, Pod

CHECKPOINTS = DATA / "checkpoints"
MINIKUBE_GPU = "GPU-11ba558d-3437-2335-2fd8-a78c8502f87f"
GPU_A = "GPU-8a1d5c3e-2f7b-4d9a-b6e4-0c3f9a2d7e15"
GPU_B = "GPU-e3b9f1a7-6c2d-4e8b-9a5f-7d1c4b8e2a63"
ENVVAR_ALLOC_RESP = base64.b64encode(
    stand_in.encode_alloc_resp(stand_in.nvidia_envvar_response([GPU_A]))
).decode()


def expected_entries(name: str) -> list[tuple[str, str, str, tuple[str, ...]]]:
    """(pod UID, container, resource, device IDs), from the scenario that wrote the file."""
    if name == "minikube-1gpu.json":  # the README's account of the real file
        return [("f2b9f4e5-ba3b-418e-ab8c-c1751a0619d8", "cuda", "nvidia.com/gpu", (MINIKUBE_GPU,))]
    (pods, _), _ = stand_in.SAMPLES[name]
    return [
        (p.pod_uid, c.name, d.resource, d.ids)
        for p in pods
        for c in p.containers
        for d in c.devices
    ]


def entries(contents: kubelet.CheckpointContents) -> list[tuple[str, str, str, tuple[str, ...]]]:
    return [(str(a.pod_uid), a.container, a.resource, a.device_ids) for a in contents.allocations]


def document(entries_: Any, registered: Any = None, **extra: Any) -> bytes:
    data = {"PodDeviceEntries": entries_, "RegisteredDevices": registered or {}}
    return json.dumps({"Data": data, "Checksum": 1, **extra}).encode()


def entry(device_ids: Any, alloc_resp: Any = ENVVAR_ALLOC_RESP, **fields: Any) -> dict[str, Any]:
    base = {"PodUID": "uid-1", "ContainerName": "main", "ResourceName": "nvidia.com/gpu"}
    return {**base, "DeviceIDs": device_ids, "AllocResp": alloc_resp, **fields}


@pytest.mark.parametrize("path", sorted(CHECKPOINTS.glob("*.json")), ids=lambda p: p.name)
def test_every_sample_checkpoint_reads_cleanly(path: Path) -> None:
    contents = kubelet.read_checkpoint(path)

    assert contents.readable and contents.warnings == ()
    assert entries(contents) == expected_entries(path.name)
    assert {a.source for a in contents.allocations} == {Source.CHECKPOINT}
    for allocation in contents.allocations:
        physical = tuple(dict.fromkeys(i.split("::")[0] for i in allocation.device_ids))
        assert allocation.visible_devices() == physical


def test_the_real_checkpoints_registered_gpu_is_read() -> None:
    contents = kubelet.read_checkpoint(CHECKPOINTS / "minikube-1gpu.json")

    assert contents.registered is not None
    assert contents.registered.device_ids("nvidia.com/gpu") == (MINIKUBE_GPU,)
    assert contents.allocations[0].response is not None
    assert contents.allocations[0].response.env("NVIDIA_VISIBLE_DEVICES") == MINIKUBE_GPU


def test_the_pre_1_20_flat_list_reads_like_the_current_format(fake_kubelet: FakeKubelet) -> None:
    pods, allocatable = stand_in.pre_1_20_node()
    fake_kubelet.set_pods(pods)
    fake_kubelet.set_allocatable(allocatable)

    old = kubelet.read_checkpoint(fake_kubelet.write_checkpoint("pre-1.20"))
    current = kubelet.read_checkpoint(fake_kubelet.write_checkpoint("current"))

    assert old.allocations == current.allocations
    assert entries(old)[1][3] == (GPU_B,)
    assert old.registered == current.registered


def test_a_device_under_several_numa_nodes_is_listed_once(fake_kubelet: FakeKubelet) -> None:
    group = Devices("nvidia.com/gpu", (GPU_A, GPU_B), numa_nodes=(1, 0))
    fake_kubelet.set_pods([Pod("p", "ns", (Container("c", (group,)),), uid="uid-1")])

    (allocation,) = kubelet.read_checkpoint(fake_kubelet.write_checkpoint()).allocations

    assert allocation.device_ids == (GPU_A, GPU_B)


def test_numa_keys_are_read_in_numeric_order_including_no_topology() -> None:
    ids = {"10": ["GPU-c"], "2": ["GPU-b"], "-1": ["GPU-a"], "0": ["GPU-a"]}

    contents = kubelet.parse_checkpoint(document([entry(ids, None)]), "cp")

    assert contents.allocations[0].device_ids == ("GPU-a", "GPU-b", "GPU-c")


def test_a_node_that_never_allocated_has_null_entries(fake_kubelet: FakeKubelet) -> None:
    fake_kubelet.set_allocatable(Allocatable((Devices("nvidia.com/gpu", (GPU_A,)),)))

    path = fake_kubelet.write_checkpoint()

    assert json.loads(path.read_text())["Data"]["PodDeviceEntries"] is None
    contents = kubelet.read_checkpoint(path)
    assert (contents.allocations, contents.warnings, contents.readable) == ((), (), True)
    assert contents.registered is not None and contents.registered.device_ids("nvidia.com/gpu") == (
        GPU_A,
    )


def test_unknown_top_level_keys_and_a_missing_checksum_are_fine() -> None:
    data = document([entry({"-1": [GPU_A]})], BootID="2f1c9e0a-boot", Future={"x": 1})

    contents = kubelet.parse_checkpoint(data, "cp")

    assert contents.warnings == () and entries(contents)[0][3] == (GPU_A,)
    no_checksum = json.dumps({"Data": {"PodDeviceEntries": None, "RegisteredDevices": {}}})
    assert kubelet.parse_checkpoint(no_checksum.encode(), "cp").readable


def test_the_checksum_is_said_to_be_unverified(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="kubectl_gpu"):
        kubelet.parse_checkpoint(document([]), "node1.json")

    assert "node1.json: checksum not verified" in caplog.text


def test_every_alloc_resp_field_is_decoded(fake_kubelet: FakeKubelet) -> None:
    response = stand_in.AllocateResponse(
        envs={
            "NVIDIA_VISIBLE_DEVICES": "/var/run/nvidia-container-devices",
            "NVIDIA_GDS": "enabled",
        },
        mounts=(stand_in.Mount(f"/var/run/nvidia-container-devices/{GPU_A}", "/dev/null", True),),
        devices=(stand_in.DeviceSpec("/dev/nvidia0", "/dev/nvidia0", "rw"),),
        annotations={
            "cdi.k8s.io/nvidia-device-plugin_1": f"k8s.device-plugin.nvidia.com/gpu={GPU_A}"
        },
        cdi_devices=(f"k8s.device-plugin.nvidia.com/gpu={GPU_A}",),
    )
    container = Container("c", (Devices("nvidia.com/gpu", (GPU_A,)),), alloc_resp=response)
    fake_kubelet.set_pods([Pod("p", "ns", (container,), uid="uid-1")])

    (allocation,) = kubelet.read_checkpoint(fake_kubelet.write_checkpoint()).allocations

    decoded = allocation.response
    assert decoded is not None
    assert decoded.env("NVIDIA_GDS") == "enabled"
    assert decoded.mounts == (
        Mount(f"/var/run/nvidia-container-devices/{GPU_A}", "/dev/null", True),
    )
    assert decoded.devices == (DeviceSpec("/dev/nvidia0", "/dev/nvidia0", "rw"),)
    assert dict(decoded.annotations) == dict(response.annotations)
    assert decoded.cdi_devices == response.cdi_devices
    assert allocation.visible_devices() == (GPU_A,)


@pytest.mark.parametrize(
    ("alloc_resp", "problem"),
    [("%%% not base64", "AllocResp not decoded"), ("/////w==", "not a ContainerAllocateResponse")],
)
def test_a_bad_alloc_resp_is_a_warning_and_the_entry_stays(alloc_resp: str, problem: str) -> None:
    contents = kubelet.parse_checkpoint(document([entry([GPU_A], alloc_resp)]), "cp")

    assert entries(contents) == [("uid-1", "main", "nvidia.com/gpu", (GPU_A,))]
    assert contents.allocations[0].response is None
    (warning,) = contents.warnings
    assert warning.startswith("cp: PodDeviceEntries[0]: ") and problem in warning


def test_a_null_alloc_resp_is_simply_absent() -> None:
    contents = kubelet.parse_checkpoint(document([entry([GPU_A], None)]), "cp")

    assert contents.warnings == () and contents.allocations[0].response is None


@pytest.mark.parametrize(
    "bad",
    [None, "entry", entry([GPU_A], PodUID=7), entry({"0": [1]}), entry("GPU-a"), {"PodUID": "u"}],
    ids=["null", "string", "uid-number", "id-number", "ids-string", "missing-fields"],
)
def test_a_bad_entry_is_skipped_with_a_warning_naming_it(bad: Any) -> None:
    good = entry([GPU_B], PodUID="uid-2")

    contents = kubelet.parse_checkpoint(document([bad, good]), "node1.json")

    assert entries(contents) == [("uid-2", "main", "nvidia.com/gpu", (GPU_B,))]
    (warning,) = contents.warnings
    assert warning.startswith("node1.json: PodDeviceEntries[0]: ") and "skipped" in warning


def test_unusable_registered_devices_are_unknown_not_empty() -> None:
    contents = kubelet.parse_checkpoint(document([entry([GPU_A])], registered=["x"]), "cp")

    assert contents.registered is None and contents.readable
    assert entries(contents) and "RegisteredDevices" in contents.warnings[0]


@pytest.mark.parametrize("kind", ["truncated", "not-json", "wrong-shape"])
def test_a_corrupt_checkpoint_is_a_warning_naming_the_file(
    fake_kubelet: FakeKubelet, kind: Any
) -> None:
    fake_kubelet.set_pods(stand_in.time_sliced_node()[0])
    path = fake_kubelet.write_corrupt_checkpoint(kind)

    contents = kubelet.read_checkpoint(path)

    assert not contents.readable
    assert (contents.allocations, contents.registered) == ((), None)
    (warning,) = contents.warnings
    assert warning.startswith(f"cannot read kubelet's checkpoint {path}: ")


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"[]", "JSON list, not an object"),
        (b'{"Checksum": 1}', "no `Data` object"),
        (b'{"Data": {"PodDeviceEntries": {}}}', "`Data.PodDeviceEntries` is a JSON dict"),
        (b"\xff\xfe\x00", "not JSON"),
    ],
)
def test_shapes_kubelet_would_reject_say_what_is_wrong(data: bytes, problem: str) -> None:
    (warning,) = kubelet.parse_checkpoint(data, "<stdin>").warnings

    assert warning.startswith("cannot read kubelet's checkpoint <stdin>: ") and problem in warning


def test_a_missing_or_unreadable_file_is_a_warning(tmp_path: Path) -> None:
    missing = kubelet.read_checkpoint(tmp_path / "kubelet_internal_checkpoint")
    directory = kubelet.read_checkpoint(tmp_path)

    assert "no such file" in missing.warnings[0] and not missing.readable
    assert str(tmp_path) in directory.warnings[0] and not directory.readable


def test_an_oversized_input_is_refused_without_parsing() -> None:
    contents = kubelet.parse_checkpoint(b" " * (kubelet.MAX_CHECKPOINT_BYTES + 1), "<stdin>")

    assert not contents.readable and "larger than 16 MiB" in contents.warnings[0]


def test_the_paths_are_relative_to_the_kubelet_root() -> None:
    microk8s = Path("/var/snap/microk8s/common/var/lib/kubelet")

    assert kubelet.checkpoint_path() == Path(
        "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"
    )
    assert kubelet.socket_path() == Path("/var/lib/kubelet/pod-resources/kubelet.sock")
    assert kubelet.socket_path(microk8s) == microk8s / "pod-resources" / "kubelet.sock"
