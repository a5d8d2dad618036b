"""Read a GPU node's NVML inventory, read-only, into a JSON file the tests can keep as a fixture.

Run it on a node with a real GPU (`python3 scripts/nvml_readings.py OUT.json`). It makes
only NVML *get* calls: it never changes MIG mode, creates or destroys an instance, or resets
a GPU. For each GPU it records what `kubectl_gpu.nvml` and the NVML stand-in
(tests/kit/node/libnvml) both speak about: name, UUID, PCI device ID, memory, MIG mode, every
GPU-instance profile NVML reports with its possible placements and remaining capacity, and
the instances present. A call that fails is recorded by NVML's error symbol, since which
call fails on which board (and with MIG off) is itself what the stand-in must copy. Then it
runs kubectl-gpu's own reader (`kubectl_gpu.nvml.session`) over the same GPUs and records
what it made of them, or the error it raised.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import pynvml


def _symbol(error: pynvml.NVMLError) -> str:
    for name in dir(pynvml):
        if name.startswith("NVML_ERROR_") and getattr(pynvml, name) == error.value:
            return name
    return f"NVML error {error.value}"


def _read(call: Callable[..., Any], *args: Any) -> Any:
    try:
        return _plain(call(*args))
    except pynvml.NVMLError as e:
        return {"error": _symbol(e)}


def _plain(value: Any) -> Any:
    """ctypes structures, bytes and tuples as JSON."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "_fields_"):
        return {name: _plain(getattr(value, name)) for name, *_ in value._fields_}
    if isinstance(value, ctypes._SimpleCData):
        return value.value
    return value


def _answer(call: Callable[..., Any], *args: Any) -> str:
    """ "ok" or the error symbol, for a call whose result is a handle."""
    try:
        call(*args)
    except pynvml.NVMLError as e:
        return _symbol(e)
    return "ok"


def _instances(handle: Any, profile_id: int) -> Any:
    count = pynvml.c_uint(0)
    array = (pynvml.c_nvmlGpuInstance_t * 8)()
    try:
        pynvml.nvmlDeviceGetGpuInstances(handle, profile_id, array, pynvml.byref(count))
    except pynvml.NVMLError as e:
        return {"error": _symbol(e)}
    return count.value


def _placements(handle: Any, profile_id: int) -> Any:
    count = pynvml.c_uint(0)
    array = (pynvml.c_nvmlGpuInstancePlacement_t * 8)()
    try:
        pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(
            handle, profile_id, array, pynvml.byref(count)
        )
    except pynvml.NVMLError as e:
        return {"error": _symbol(e)}
    return [{"start": array[i].start, "size": array[i].size} for i in range(count.value)]


def _profiles(handle: Any) -> list[dict[str, Any]]:
    found = []
    for enum in range(pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT):
        info = _read(pynvml.nvmlDeviceGetGpuInstanceProfileInfo, handle, enum)
        entry: dict[str, Any] = {"enum": enum, "info": info}
        if "error" not in info:
            entry["placements"] = _placements(handle, info["id"])
            entry["remaining"] = _read(
                pynvml.nvmlDeviceGetGpuInstanceRemainingCapacity, handle, info["id"]
            )
        found.append(entry)
    return found


def _gpu(index: int) -> dict[str, Any]:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    return {
        "index": index,
        "name": _read(lambda: pynvml.nvmlDeviceGetName(handle)),
        "uuid": _read(lambda: pynvml.nvmlDeviceGetUUID(handle)),
        "minor_number": _read(lambda: pynvml.nvmlDeviceGetMinorNumber(handle)),
        "pci": _read(lambda: pynvml.nvmlDeviceGetPciInfo_v3(handle)),
        "memory": _read(lambda: pynvml.nvmlDeviceGetMemoryInfo(handle)),
        "architecture": _read(lambda: pynvml.nvmlDeviceGetArchitecture(handle)),
        "compute_capability": _read(lambda: pynvml.nvmlDeviceGetCudaComputeCapability(handle)),
        "mig_mode": _read(lambda: pynvml.nvmlDeviceGetMigMode(handle)),
        "max_mig_devices": _read(lambda: pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)),
        "compute_processes": _read(
            lambda: len(pynvml.nvmlDeviceGetComputeRunningProcesses(handle))
        ),
        "gpu_instance_profiles": _profiles(handle),
        # what the instance queries answer (with MIG off: which error)
        "gpu_instances_of_profile_0": _instances(handle, 0),
        "gpu_instance_by_id_1": _answer(pynvml.nvmlDeviceGetGpuInstanceById, handle, 1),
        "mig_device_handle_0": _answer(pynvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, 0),
        "is_mig_device_handle": _read(pynvml.nvmlDeviceIsMigDeviceHandle, handle),
        "memory_v2": _read(pynvml.nvmlDeviceGetMemoryInfo, handle, pynvml.nvmlMemory_v2),
    }


def _ours() -> dict[str, Any]:
    """What kubectl-gpu's own reader makes of the same GPUs (read calls only)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from kubectl_gpu import nvml  # noqa: PLC0415 - needs the checkout on sys.path
    from kubectl_gpu.errors import DeviceError  # noqa: PLC0415

    try:
        with nvml.session() as gpus:
            return {
                "state": dataclasses.asdict(gpus.read_state()),
                "inventory": [dataclasses.asdict(g) for g in gpus.inventory()],
            }
    except DeviceError as e:
        return {"error": str(e)}


def nvml_readings() -> dict[str, Any]:
    """What NVML answers about the node and each GPU (it initialises and shuts NVML down)."""
    pynvml.nvmlInit()
    try:
        return {
            "nvidia-ml-py": metadata.version("nvidia-ml-py"),
            "driver": _read(pynvml.nvmlSystemGetDriverVersion),
            "nvml": _read(pynvml.nvmlSystemGetNVMLVersion),
            "cuda_driver": _read(pynvml.nvmlSystemGetCudaDriverVersion_v2),
            "gpus": [_gpu(i) for i in range(pynvml.nvmlDeviceGetCount())],
        }
    finally:
        pynvml.nvmlShutdown()


def main() -> int:
    if len(sys.argv) != 2:
        sys.stderr.write("usage: nvml_readings.py OUT.json\n")
        return 2
    readings = nvml_readings()
    readings["kubectl_gpu"] = _ours()
    Path(sys.argv[1]).write_text(json.dumps(readings, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
