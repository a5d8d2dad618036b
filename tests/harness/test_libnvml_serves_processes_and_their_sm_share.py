"""A simulated node's libnvidia-ml.so.1 serves the compute processes the node's state file lists,
as `kubectl gpu top` and NVIDIA's exporters read them: per GPU and per MIG device with their
GPU/compute-instance IDs, and each busy process's SM share through
nvmlDeviceGetProcessUtilization, which nvml.h says MIG-enabled GPUs do not support (and which
answers NOT_FOUND when no process was busy)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.kit.node.libnvml.driver import DriverRoot, lay_out
from tests.kit.node.libnvml.library import FakeLibNvml
from tests.kit.node.libnvml.statefile import GpuStateFile

MIB = 1024 * 1024
# A process on the node, reading NVML as a monitoring agent does.
READ = """
import json, pynvml
def ask(call, *args):
    try:
        return call(*args)
    except pynvml.NVMLError as error:
        return "error %d" % error.value
def procs(handle):
    found = ask(pynvml.nvmlDeviceGetComputeRunningProcesses, handle)
    if isinstance(found, str):
        return found
    return [[p.pid, p.usedGpuMemory, p.gpuInstanceId, p.computeInstanceId] for p in found]
def shares(handle):
    found = ask(pynvml.nvmlDeviceGetProcessUtilization, handle, 0)
    return found if isinstance(found, str) else sorted([s.pid, s.smUtil] for s in found)
pynvml.nvmlInit()
out = {}
for i in range(pynvml.nvmlDeviceGetCount()):
    gpu = pynvml.nvmlDeviceGetHandleByIndex(i)
    out[i] = {"processes": procs(gpu), "sm": shares(gpu), "mig": []}
    for j in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(gpu)):
        mig = ask(pynvml.nvmlDeviceGetMigDeviceHandleByIndex, gpu, j)
        if not isinstance(mig, str):
            out[i]["mig"].append({"processes": procs(mig), "sm": shares(mig)})
print(json.dumps(out))
"""


def _node(tmp_path: Path) -> DriverRoot:
    """GPU 0 without MIG, busy processes 101 (40 % SM) and 102 (idle); GPU 1 with two MIG
    devices, a process in the second; GPU 2 idle."""
    driver = lay_out(tmp_path / "driver")
    lib = FakeLibNvml(["H100-SXM5-80GB"] * 3)
    gpu = lib.gpu(1)
    gpu.set_mig_mode(1)
    for profile_id in (9, 9):  # 3g.40gb twice
        profile = gpu.mig.profile_by_id(profile_id)
        assert profile is not None
        _, gi = gpu.mig.create_gpu_instance(profile, None)
        assert gi is not None
        ci_profile = gi.ci_profile(2)  # 3 slices: the whole GPU instance
        assert ci_profile is not None
        gpu.mig.create_compute_instance(gi, ci_profile, None)
    state = GpuStateFile(driver.state)
    with state.locked():
        state.save(lib)
    # The records as the simulation writes them, with the SM share of each process.
    document: dict[str, Any] = json.loads(driver.state.read_text())
    second_gi = document["gpus"][1]["gpu_instances"][1]["id"]
    document["gpus"][0]["processes"] = [
        {"pid": 101, "used_memory": 1024 * MIB, "gpu_instance_id": None,
         "compute_instance_id": None, "sm_percent": 40},
        {"pid": 102, "used_memory": 256 * MIB, "gpu_instance_id": None,
         "compute_instance_id": None, "sm_percent": 0},
    ]  # fmt: skip
    document["gpus"][1]["processes"] = [
        {"pid": 201, "used_memory": 512 * MIB, "gpu_instance_id": second_gi,
         "compute_instance_id": 0, "sm_percent": 70},
    ]  # fmt: skip
    with state.locked():
        driver.state.write_text(json.dumps(document))
    return driver


@pytest.fixture
def read(tmp_path: Path) -> dict[str, Any]:
    driver = _node(tmp_path)
    done = subprocess.run(  # noqa: S603 (fixed argv)
        [sys.executable, "-c", READ], env={**os.environ, **driver.env()},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    readings: dict[str, Any] = json.loads(done.stdout)
    return readings


def test_processes_are_listed_with_their_memory(read: dict[str, Any]) -> None:
    none = 0xFFFFFFFF
    assert read["0"]["processes"] == [[101, 1024 * MIB, none, none], [102, 256 * MIB, none, none]]
    assert read["2"]["processes"] == []


def test_a_mig_devices_process_carries_its_instance_ids(read: dict[str, Any]) -> None:
    whole, (first, second) = read["1"]["processes"], read["1"]["mig"]

    assert first["processes"] == []
    assert [p[0] for p in second["processes"]] == [201]
    assert whole == second["processes"]  # the GPU lists it too, with its instance IDs
    assert second["processes"][0][3] == 0


def test_each_busy_process_reports_its_sm_share(read: dict[str, Any]) -> None:
    assert read["0"]["sm"] == [[101, 40]]  # the idle process has no sample


def test_no_busy_process_is_not_found_and_mig_is_not_supported(read: dict[str, Any]) -> None:
    assert read["2"]["sm"] == "error 6"  # NVML_ERROR_NOT_FOUND
    assert read["1"]["sm"] == "error 3"  # NVML_ERROR_NOT_SUPPORTED on a MIG-enabled GPU
    assert all(m["sm"] == "error 3" for m in read["1"]["mig"])
