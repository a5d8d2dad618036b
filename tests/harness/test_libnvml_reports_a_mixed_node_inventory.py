"""Through pynvml's real wrappers, the NVML stand-in reports a mixed node (2×H100 + 1×L4) the way
libnvidia-ml does: count, names, UUIDs, PCI info, memory, compute capability, handles by UUID and
bus ID, versions and running processes."""

from __future__ import annotations

import re

import pynvml
import pytest

from tests.kit.node.libnvml import FakeLibNvml
from tests.kit.node.libnvml.fixture import MakeFakeNvml

GPU_UUID = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
BUS_ID = re.compile(r"^[0-9A-F]{8}:[0-9A-F]{2}:00\.0$")
MIB = 1024 * 1024


@pytest.fixture
def node(fake_nvml: MakeFakeNvml) -> FakeLibNvml:
    lib = fake_nvml(gpus=["H100-SXM5-80GB", "H100-SXM5-80GB", "L4"])
    pynvml.nvmlInit()
    return lib


def _handles() -> list[object]:
    return [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]


def test_names_come_in_nvml_index_order(node: FakeLibNvml) -> None:
    names = [pynvml.nvmlDeviceGetName(h) for h in _handles()]

    assert names == ["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", "NVIDIA L4"]


def test_each_gpu_has_its_own_well_formed_uuid(node: FakeLibNvml) -> None:
    uuids = [pynvml.nvmlDeviceGetUUID(h) for h in _handles()]

    assert all(GPU_UUID.match(u) for u in uuids), uuids
    assert len(set(uuids)) == 3


def test_index_and_minor_number_follow_the_position(node: FakeLibNvml) -> None:
    handles = _handles()

    assert [pynvml.nvmlDeviceGetIndex(h) for h in handles] == [0, 1, 2]
    assert [pynvml.nvmlDeviceGetMinorNumber(h) for h in handles] == [0, 1, 2]


def test_pci_info_carries_the_device_id_and_both_bus_id_forms(node: FakeLibNvml) -> None:
    infos = [pynvml.nvmlDeviceGetPciInfo(h) for h in _handles()]

    assert [hex(i.pciDeviceId) for i in infos] == ["0x233010de", "0x233010de", "0x27b810de"]
    assert all(BUS_ID.match(i.busId) for i in infos), [i.busId for i in infos]
    assert infos[0].busIdLegacy == infos[0].busId[4:]  # "0000:18:00.0" in the old field
    assert len({i.bus for i in infos}) == 3


def test_handles_are_found_again_by_uuid_and_by_either_bus_id_form(node: FakeLibNvml) -> None:
    l4 = _handles()[2]
    uuid, bus_id = pynvml.nvmlDeviceGetUUID(l4), pynvml.nvmlDeviceGetPciInfo(l4).busId

    by_uuid = pynvml.nvmlDeviceGetHandleByUUID(uuid)
    by_bus = pynvml.nvmlDeviceGetHandleByPciBusId(bus_id[4:].lower())

    assert pynvml.nvmlDeviceGetIndex(by_uuid) == pynvml.nvmlDeviceGetIndex(by_bus) == 2


def test_an_unknown_uuid_is_not_found(node: FakeLibNvml) -> None:
    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000")


def test_an_index_past_the_last_gpu_is_an_invalid_argument(node: FakeLibNvml) -> None:
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        pynvml.nvmlDeviceGetHandleByIndex(3)


def test_memory_adds_up_and_counts_running_processes(node: FakeLibNvml) -> None:
    node.add_process(1, pid=4242, used_mib=1024)

    idle, busy = (pynvml.nvmlDeviceGetMemoryInfo(h) for h in _handles()[:2])

    assert idle.total == 81559 * MIB and idle.used == 0 and idle.free == idle.total
    assert busy.used == 1024 * MIB and busy.free == busy.total - busy.used


def test_memory_v2_reports_reserved_memory_apart(fake_nvml: MakeFakeNvml) -> None:
    lib = fake_nvml(gpus=["L4"])
    lib.gpu(0).memory_reserved = 400 * MIB
    pynvml.nvmlInit()

    v2 = pynvml.nvmlDeviceGetMemoryInfo(_handles()[0], version=pynvml.nvmlMemory_v2)

    assert (v2.reserved, v2.used) == (400 * MIB, 0)
    assert v2.total == v2.reserved + v2.used + v2.free


def test_compute_capability_is_per_model(node: FakeLibNvml) -> None:
    capabilities = [pynvml.nvmlDeviceGetCudaComputeCapability(h) for h in _handles()]

    assert capabilities == [(9, 0), (9, 0), (8, 9)]


def test_running_processes_are_listed_per_gpu(node: FakeLibNvml) -> None:
    node.add_process(0, pid=100, used_mib=512)
    node.add_process(0, pid=101, used_mib=256)

    on_first, on_l4 = (pynvml.nvmlDeviceGetComputeRunningProcesses(h) for h in _handles()[::2])

    assert sorted((p.pid, p.usedGpuMemory) for p in on_first) == [
        (100, 512 * MIB),
        (101, 256 * MIB),
    ]
    assert on_first[0].gpuInstanceId == 0xFFFFFFFF  # no MIG: NVML's "not available"
    assert on_l4 == []


def test_driver_and_nvml_versions_are_reported(node: FakeLibNvml) -> None:
    assert pynvml.nvmlSystemGetDriverVersion() == "580.159.04"
    assert pynvml.nvmlSystemGetNVMLVersion() == "13.580.159.04"
