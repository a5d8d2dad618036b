"""The script that reads GPU processes on a lent GPU only asks NVML questions.

`scripts/gpu_process_reading.py` runs on real GPUs lent to the project, where changing MIG mode
or resetting the GPU is not allowed: every NVML call it names must be a query, and its CUDA
programs may only create a context, allocate, fill and run a kernel in it.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_process_reading.py"
READING = ROOT / "tests" / "data" / "nvml" / "h200-driver-580.159.04-processes.json"
# Names that are queries, or not calls at all (pynvml's library handle, struct and record types).
_QUERIES = ("nvmlDeviceGet", "nvmlSystemGet", "nvmlInit", "nvmlShutdown")
_NOT_CALLS = {"nvmlLib", "nvmlMemory_v2", "nvmlFriendlyObject"}
_CUDA = {
    "cuInit", "cuDeviceGet", "cuCtxCreate_v2", "cuMemAlloc_v2", "cuMemsetD8_v2",
    "cuCtxSynchronize", "cuModuleLoadData", "cuModuleGetFunction", "cuLaunchKernel",
    "cuGetErrorString",
    # the same calls named in the messages of a failed step
    "cuCtxCreate", "cuMemAlloc", "cuMemsetD8",
}  # fmt: skip


def _names(prefix: str) -> set[str]:
    tree = ast.parse(SCRIPT.read_text())
    names = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    names |= {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }
    return {n for n in names if n.startswith(prefix) and n[len(prefix) : len(prefix) + 1].isupper()}


def test_every_nvml_call_is_a_query() -> None:
    calls = _names("nvml")
    assert "nvmlDeviceGetComputeRunningProcesses" in calls
    assert [c for c in calls - _NOT_CALLS if not c.startswith(_QUERIES)] == []


def test_the_cuda_programs_only_allocate_and_compute() -> None:
    assert _names("cu") <= _CUDA


def test_the_kept_reading_shows_each_program_with_its_own_memory() -> None:
    """What the fixture is for: NVML's per-process memory is the context plus what the program
    allocated, so two programs on one GPU read differently; a device figure would not."""
    reading = json.loads(READING.read_text())
    idle = next(s for s in reading["stages"] if s["stage"] == "allocated, idle")
    by_pid = {p["pid"]: p["usedGpuMemory"] for p in idle["compute_processes"]}
    pids = {role: idle["programs"][role]["pid"] for role in ("busy", "idle")}
    contexts = next(s for s in reading["stages"] if s["stage"] == "contexts only")
    context = contexts["compute_processes"][0]["usedGpuMemory"]
    mib = 1024 * 1024
    for role, allocated in reading["allocations_mib"].items():
        assert by_pid[pids[role]] == context + allocated * mib
