"""The stand-in writes kubelet_internal_checkpoint as kubelet marshals it (docs/upstream-facts.md
N1.2, N1.3): Go field names as keys, DeviceIDs keyed by NUMA node (or a flat list before 1.20),
replaced by rename so a reader never sees half a file."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.kit.node.kubelet import (
    Allocatable,
    Container,
    Devices,
    FakeKubelet,
    Pod,
    time_sliced_node,
)

REAL = Path(__file__).resolve().parents[1] / "data" / "checkpoints" / "minikube-1gpu.json"
ENTRY_KEYS = ["PodUID", "ContainerName", "ResourceName", "DeviceIDs", "AllocResp"]


def _written(kubelet: FakeKubelet, fmt: Any = "current") -> dict[str, Any]:
    document: dict[str, Any] = json.loads(kubelet.write_checkpoint(fmt).read_text("utf-8"))
    return document


def _two_numa_pod() -> Pod:
    group = Devices("nvidia.com/gpu", ("GPU-a", "GPU-b"), numa_nodes=(1, 0))
    return Pod("p", "ns", (Container("c", (group,)),), uid="uid-1")


def test_current_format_uses_the_same_keys_as_a_real_checkpoint(fake_kubelet: FakeKubelet) -> None:
    pods, allocatable = time_sliced_node()
    fake_kubelet.set_pods(pods)
    fake_kubelet.set_allocatable(allocatable)
    real = json.loads(REAL.read_text("utf-8"))

    written = _written(fake_kubelet)

    assert list(written) == ["Data", "Checksum"]
    assert list(written["Data"]) == list(real["Data"]) == ["PodDeviceEntries", "RegisteredDevices"]
    for entry in written["Data"]["PodDeviceEntries"]:
        assert list(entry) == list(real["Data"]["PodDeviceEntries"][0]) == ENTRY_KEYS
    assert 0 <= written["Checksum"] < 2**32


def test_current_format_lists_a_device_under_every_numa_node(fake_kubelet: FakeKubelet) -> None:
    fake_kubelet.set_pods([_two_numa_pod()])

    (entry,) = _written(fake_kubelet)["Data"]["PodDeviceEntries"]

    assert entry["PodUID"] == "uid-1"
    assert entry["DeviceIDs"] == {"0": ["GPU-a", "GPU-b"], "1": ["GPU-a", "GPU-b"]}
    assert list(entry["DeviceIDs"]) == ["0", "1"]


def test_devices_without_topology_are_keyed_minus_one(fake_kubelet: FakeKubelet) -> None:
    fake_kubelet.set_pods([Pod("p", "ns", (Container("c", (Devices("r", ("MIG-x",)),)),))])

    (entry,) = _written(fake_kubelet)["Data"]["PodDeviceEntries"]

    assert entry["DeviceIDs"] == {"-1": ["MIG-x"]}


def test_pre_1_20_format_has_a_flat_device_list(fake_kubelet: FakeKubelet) -> None:
    fake_kubelet.set_pods([_two_numa_pod()])

    (entry,) = _written(fake_kubelet, "pre-1.20")["Data"]["PodDeviceEntries"]

    assert list(entry) == ENTRY_KEYS
    assert entry["DeviceIDs"] == ["GPU-a", "GPU-b"]


def test_a_node_without_allocations_writes_null_entries(fake_kubelet: FakeKubelet) -> None:
    fake_kubelet.set_allocatable(Allocatable(devices=(Devices("nvidia.com/gpu", ("GPU-a",)),)))

    data = _written(fake_kubelet)["Data"]

    assert data == {"PodDeviceEntries": None, "RegisteredDevices": {"nvidia.com/gpu": ["GPU-a"]}}


def test_each_container_and_resource_gets_its_own_entry(fake_kubelet: FakeKubelet) -> None:
    pods, _ = time_sliced_node()
    fake_kubelet.set_pods(pods)

    entries = _written(fake_kubelet)["Data"]["PodDeviceEntries"]

    assert [(e["PodUID"], e["ContainerName"]) for e in entries] == [
        (p.pod_uid, c.name) for p in pods for c in p.containers
    ]


def test_the_file_is_replaced_by_rename(fake_kubelet: FakeKubelet) -> None:
    first = fake_kubelet.write_checkpoint()
    handle = open(first, "rb")  # a reader holding the old file keeps seeing it whole
    try:
        fake_kubelet.set_pods([_two_numa_pod()])
        fake_kubelet.write_checkpoint()
        old = json.loads(handle.read())
    finally:
        handle.close()

    assert old["Data"]["PodDeviceEntries"] is None
    assert _written(fake_kubelet)["Data"]["PodDeviceEntries"][0]["PodUID"] == "uid-1"
    assert [p.name for p in first.parent.iterdir()] == ["kubelet_internal_checkpoint"]


@pytest.mark.parametrize("kind", ["truncated", "not-json"])
def test_corrupt_checkpoints_do_not_parse(fake_kubelet: FakeKubelet, kind: Any) -> None:
    fake_kubelet.set_pods([_two_numa_pod()])

    path = fake_kubelet.write_corrupt_checkpoint(kind)

    with pytest.raises(ValueError):  # JSONDecodeError and UnicodeDecodeError
        json.loads(path.read_bytes().decode("utf-8"))


def test_a_wrong_shape_checkpoint_parses_but_holds_no_entries(fake_kubelet: FakeKubelet) -> None:
    path = fake_kubelet.write_corrupt_checkpoint("wrong-shape")

    assert json.loads(path.read_text("utf-8"))["Data"]["PodDeviceEntries"] == "oops"


def test_a_real_checkpoint_is_installed_unchanged(fake_kubelet: FakeKubelet) -> None:
    path = fake_kubelet.write_checkpoint_file(REAL)

    assert path == fake_kubelet.root / "device-plugins" / "kubelet_internal_checkpoint"
    assert path.read_bytes() == REAL.read_bytes()
    assert stat.S_ISREG(path.stat().st_mode)


def test_removing_the_checkpoint_leaves_the_directory(fake_kubelet: FakeKubelet) -> None:
    fake_kubelet.write_checkpoint()

    fake_kubelet.remove_checkpoint()

    assert not fake_kubelet.checkpoint_path.exists()
    assert fake_kubelet.checkpoint_path.parent.is_dir()
