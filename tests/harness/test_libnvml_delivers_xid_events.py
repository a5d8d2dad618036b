"""A simulated node's libnvidia-ml.so.1 delivers Xid errors through NVML event sets, as the
device plugin's health checker waits for them: an event raised after registration arrives with
its Xid, its GPU and (on a MIG device) its instance IDs; nothing arrives within the timeout when
none was raised; one raised by another process on the node arrives while the caller waits."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pynvml
import pytest

from tests.kit.node.libnvml import installed
from tests.kit.node.libnvml.clib import CLibNvml
from tests.kit.node.libnvml.statefile import GpuStateFile

XID = pynvml.nvmlEventTypeXidCriticalError
NOT_AVAILABLE = 0xFFFFFFFF


@pytest.fixture
def lib(tmp_path: Path) -> Iterator[CLibNvml]:
    node = CLibNvml(["H100-SXM5-80GB", "H100-SXM5-80GB"], tmp_path / "driver")
    with installed(node):
        pynvml.nvmlInit()
        yield node


def _watching(gpu: int) -> Any:
    events = pynvml.nvmlEventSetCreate()
    handle = pynvml.nvmlDeviceGetHandleByIndex(gpu)
    assert pynvml.nvmlDeviceGetSupportedEventTypes(handle) & XID
    pynvml.nvmlDeviceRegisterEvents(handle, XID, events)
    return events


def test_an_xid_raised_after_registration_arrives_with_its_gpu(lib: CLibNvml) -> None:
    lib.raise_xid(0, 31)  # before anyone listened: not delivered
    events = _watching(0)
    lib.raise_xid(0, 79)

    data = pynvml.nvmlEventSetWait(events, 1000)

    assert (data.eventType, data.eventData) == (XID, 79)
    assert pynvml.nvmlDeviceGetUUID(data.device) == lib.gpu(0).uuid
    assert (data.gpuInstanceId, data.computeInstanceId) == (NOT_AVAILABLE, NOT_AVAILABLE)
    with pytest.raises(pynvml.NVMLError_Timeout):
        pynvml.nvmlEventSetWait(events, 0)  # delivered once
    pynvml.nvmlEventSetFree(events)


def test_an_xid_on_another_gpu_is_not_delivered(lib: CLibNvml) -> None:
    events = _watching(0)
    lib.raise_xid(1, 48)

    started = time.monotonic()
    with pytest.raises(pynvml.NVMLError_Timeout):
        pynvml.nvmlEventSetWait(events, 200)
    assert time.monotonic() - started >= 0.15  # it waited for the timeout


def test_an_xid_in_a_mig_device_names_its_instances(lib: CLibNvml) -> None:
    gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
    pynvml.nvmlDeviceSetMigMode(gpu, pynvml.NVML_DEVICE_MIG_ENABLE)
    gi = pynvml.nvmlDeviceCreateGpuInstance(gpu, 9)  # 3g.40gb
    pynvml.nvmlGpuInstanceCreateComputeInstance(gi, pynvml.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE)
    gi_id = pynvml.nvmlGpuInstanceGetInfo(gi).id
    events = _watching(0)
    lib.raise_xid(0, 94, mig_device=(gi_id, 0))

    data = pynvml.nvmlEventSetWait(events, 1000)

    assert (data.eventData, data.gpuInstanceId, data.computeInstanceId) == (94, gi_id, 0)


def test_an_xid_raised_by_another_process_arrives_during_the_wait(lib: CLibNvml) -> None:
    events = _watching(1)
    other = GpuStateFile(lib.driver.state)  # another process on the node: the file, its lock
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(pynvml.nvmlEventSetWait(events, 5000)))
    waiter.start()
    time.sleep(0.2)
    with other.locked(), lib.lock:
        lib.gpu(1).raise_xid(63)
        other.save(lib)
    waiter.join(10)

    assert got and got[0].eventData == 63
