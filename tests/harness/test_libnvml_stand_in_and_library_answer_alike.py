"""The Python stand-in, kept for tests that run pynvml-level code in their own process, answers as
the simulated nodes' C library does: one script drives a whole MIG life cycle through pynvml
(mode on, every GPU-instance profile created where the driver chooses, every compute-instance
profile inside it, MIG devices enumerated, a process in one, refusals while in use, everything
destroyed, mode off) and records every answer or error; both libraries must give the same record.
Only MIG UUIDs differ by design (each library makes its own), so they are compared by the order
they first appear in."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynvml
import pytest

from tests.kit.node.libnvml import FakeLibNvml, installed
from tests.kit.node.libnvml.clib import CLibNvml

MODELS = ("A100-SXM4-40GB", "H100-SXM5-80GB", "H200-SXM-141GB", "A30", "L4")
MIB = 1024 * 1024


def _plain(value: Any) -> Any:
    if isinstance(value, ctypes._Pointer):
        return "a handle" if value else "NULL"
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "_fields_"):
        return {name: _plain(getattr(value, name)) for name, *_ in value._fields_
                if not name.startswith(("device", "gpuInstance"))}  # fmt: skip
    if isinstance(value, ctypes._SimpleCData):
        return value.value
    if isinstance(value, pynvml.nvmlFriendlyObject):
        return dict(sorted(vars(value).items()))
    return value


class Record:
    """Every answer of the script, in order: the value, or NVML's error symbol."""

    def __init__(self) -> None:
        self.answers: list[tuple[str, Any]] = []

    def ask(self, what: str, call: Callable[..., Any], *args: Any) -> Any:
        try:
            result = call(*args)
        except pynvml.NVMLError as error:
            self.answers.append((what, f"error {error.value}"))
            return None
        self.answers.append((what, _plain(result)))
        return result


def _life_cycle(lib: FakeLibNvml) -> list[tuple[str, Any]]:
    r = Record()
    pynvml.nvmlInit()
    gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
    r.ask("name", pynvml.nvmlDeviceGetName, gpu)
    r.ask("memory", pynvml.nvmlDeviceGetMemoryInfo, gpu)
    r.ask("mode", pynvml.nvmlDeviceGetMigMode, gpu)
    if r.ask("mode on", pynvml.nvmlDeviceSetMigMode, gpu, 1) == pynvml.NVML_ERROR_RESET_REQUIRED:
        r.answers.append(("reset", lib.reset(0)))  # what nvidia-smi -r does on Ampere
    r.ask("mode after", pynvml.nvmlDeviceGetMigMode, gpu)
    r.ask("max MIG devices", pynvml.nvmlDeviceGetMaxMigDeviceCount, gpu)
    instances = _partition(r, gpu)
    _enumerate(r, gpu)
    if instances:
        first = pynvml.nvmlGpuInstanceGetInfo(instances[0]).id
        lib.add_process(0, 4242, used_mib=512, mig_device=(first, 0))
        r.ask("processes", pynvml.nvmlDeviceGetComputeRunningProcesses, gpu)
        r.ask("destroy busy GI", pynvml.nvmlGpuInstanceDestroy, instances[0])
        lib.stop_process(0, 4242)
    for gi in reversed(instances):
        _tear_down(r, gi)
    r.ask("mode off", pynvml.nvmlDeviceSetMigMode, gpu, 0)
    r.ask("mode at the end", pynvml.nvmlDeviceGetMigMode, gpu)
    pynvml.nvmlShutdown()
    return _uuids_by_order(r.answers)


def _partition(r: Record, gpu: Any) -> list[Any]:
    """Every GPU-instance profile where the driver chooses, every compute instance in it."""
    instances = []
    for enum in range(pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT):
        info = r.ask(f"GI profile {enum}", pynvml.nvmlDeviceGetGpuInstanceProfileInfo, gpu, enum)
        if info is None:
            continue
        r.ask(f"GI {enum} room", pynvml.nvmlDeviceGetGpuInstanceRemainingCapacity, gpu, info.id)
        gi = r.ask(f"GI {enum} create", pynvml.nvmlDeviceCreateGpuInstance, gpu, info.id)
        if gi is None:
            continue
        instances.append(gi)
        r.ask(f"GI {enum} info", pynvml.nvmlGpuInstanceGetInfo, gi)
        for ci_enum in range(pynvml.NVML_COMPUTE_INSTANCE_PROFILE_COUNT):
            ci_info = r.ask(f"GI {enum} CI profile {ci_enum}",
                            pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo, gi, ci_enum,
                            pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)  # fmt: skip
            if ci_info is not None:
                r.ask(f"GI {enum} CI {ci_enum} create",
                      pynvml.nvmlGpuInstanceCreateComputeInstance, gi, ci_info.id)  # fmt: skip
    return instances


def _enumerate(r: Record, gpu: Any) -> None:
    """The MIG devices as the device plugin finds them: by index under the parent."""
    for j in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(gpu)):
        mig = r.ask(f"MIG {j}", pynvml.nvmlDeviceGetMigDeviceHandleByIndex, gpu, j)
        if mig is not None:
            r.ask(f"MIG {j} name", pynvml.nvmlDeviceGetName, mig)
            r.ask(f"MIG {j} UUID", pynvml.nvmlDeviceGetUUID, mig)
            r.ask(f"MIG {j} memory", pynvml.nvmlDeviceGetMemoryInfo, mig)
            r.ask(f"MIG {j} GI", pynvml.nvmlDeviceGetGpuInstanceId, mig)
            r.ask(f"MIG {j} CI", pynvml.nvmlDeviceGetComputeInstanceId, mig)


def _tear_down(r: Record, gi: Any) -> None:
    """Destroying a GPU instance with compute instances is refused; then each goes."""
    r.ask("destroy GI with CIs", pynvml.nvmlGpuInstanceDestroy, gi)
    for ci_enum in range(pynvml.NVML_COMPUTE_INSTANCE_PROFILE_COUNT):
        count = ctypes.c_uint(0)
        array = (pynvml.c_nvmlComputeInstance_t * 8)()
        try:
            pynvml.nvmlGpuInstanceGetComputeInstances(gi, ci_enum, array, ctypes.byref(count))
        except pynvml.NVMLError_NotSupported:
            continue
        for i in range(count.value):
            r.ask("destroy CI", pynvml.nvmlComputeInstanceDestroy, array[i])
    r.ask("destroy GI", pynvml.nvmlGpuInstanceDestroy, gi)


def _uuids_by_order(answers: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    seen: dict[str, str] = {}
    out = []
    for what, value in answers:
        if isinstance(value, str) and value.startswith("MIG-"):
            value = seen.setdefault(value, f"MIG UUID #{len(seen)}")
        out.append((what, value))
    return out


@pytest.mark.parametrize("model", MODELS)
def test_one_script_gets_the_same_answers_from_both(model: str, tmp_path: Path) -> None:
    with installed(FakeLibNvml([model])) as stand_in:
        expected = _life_cycle(stand_in)
    with installed(CLibNvml([model], tmp_path / "driver")) as library:
        got = _life_cycle(library)

    assert len(expected) > 10
    for want, answer in zip(expected, got, strict=True):
        assert answer == want
