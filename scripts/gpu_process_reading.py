"""Read what NVML says about GPU processes of known size, read-only, into a JSON fixture.

Run it on a node with a real GPU (`python3 scripts/gpu_process_reading.py OUT.json`). It starts
two small CUDA programs of its own (the CUDA driver API through ctypes: cuInit, cuCtxCreate,
cuMemAlloc, and one busy kernel from a PTX string), each holding a known number of bytes on GPU 0
as two time-sliced pods would, and at each stage asks NVML only *get* questions: the running
compute processes with their memory, per-process SM samples, the device's memory and
utilization, and each process's `/proc/PID/cgroup` (how a node agent maps a host PID to a pod).
It never changes MIG mode, creates or destroys an instance, or resets the GPU. What
`kubectl gpu top`'s agent-side reader must get right is in the numbers: which PID holds how much,
what part of it is the CUDA context rather than the program's own allocations, and which figures
NVML has per process at all.
"""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

MIB = 1024 * 1024
PLAN = {"busy": 1024, "idle": 4096}  # MiB each program allocates beyond its context

# A kernel that keeps every thread busy for `ns` nanoseconds of the GPU's global timer.
_SPIN_PTX = rb"""
.version 7.0
.target sm_70
.address_size 64
.visible .entry spin(.param .u64 ns)
{
  .reg .pred %p<2>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [ns];
  mov.u64 %rd2, %globaltimer;
$L_loop:
  mov.u64 %rd3, %globaltimer;
  sub.s64 %rd4, %rd3, %rd2;
  setp.lt.u64 %p1, %rd4, %rd1;
  @%p1 bra $L_loop;
  ret;
}
"""


# ---- the CUDA program (child) ------------------------------------------------------------


def _check(cuda: Any, result: int, what: str) -> None:
    if result != 0:
        text = ctypes.c_char_p()
        cuda.cuGetErrorString(result, ctypes.byref(text))
        raise SystemExit(f"{what}: CUDA error {result} {text.value!r}")


def _tell(word: str) -> None:
    sys.stdout.write(word + "\n")
    sys.stdout.flush()


def child(allocate_mib: int) -> None:
    """Hold a context and `allocate_mib` MiB on GPU 0; spin a kernel on request."""
    cuda = ctypes.CDLL("libcuda.so.1")
    _check(cuda, cuda.cuInit(0), "cuInit")
    device = ctypes.c_int()
    _check(cuda, cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
    context = ctypes.c_void_p()
    _check(cuda, cuda.cuCtxCreate_v2(ctypes.byref(context), 0, device), "cuCtxCreate")
    _tell("context")
    sys.stdin.readline()  # the parent has read the context-only stage
    pointer = ctypes.c_uint64()
    size = ctypes.c_size_t(allocate_mib * MIB)
    _check(cuda, cuda.cuMemAlloc_v2(ctypes.byref(pointer), size), "cuMemAlloc")
    _check(cuda, cuda.cuMemsetD8_v2(pointer, ctypes.c_ubyte(1), size), "cuMemsetD8")
    _check(cuda, cuda.cuCtxSynchronize(), "cuCtxSynchronize")
    _tell("allocated")
    module = ctypes.c_void_p()
    function = ctypes.c_void_p()
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "exit":
            break
        if words[0] == "spin":
            if not module.value:
                _check(cuda, cuda.cuModuleLoadData(ctypes.byref(module), _SPIN_PTX), "load")
                _check(
                    cuda, cuda.cuModuleGetFunction(ctypes.byref(function), module, b"spin"), "fn"
                )
            ns = ctypes.c_uint64(int(words[1]) * 1_000_000)
            params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(ns), ctypes.c_void_p))
            launch = cuda.cuLaunchKernel(function, 132 * 4, 1, 1, 256, 1, 1, 0, None, params, None)
            _check(cuda, launch, "cuLaunchKernel")
            _tell("spinning")
            _check(cuda, cuda.cuCtxSynchronize(), "cuCtxSynchronize")
            _tell("spun")


# ---- the reading (parent) ----------------------------------------------------------------


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "_fields_"):
        return {name: _plain(getattr(value, name)) for name, *_ in value._fields_}
    if isinstance(value, ctypes._SimpleCData):
        return value.value
    if type(value).__name__ == "nvmlFriendlyObject":  # pynvml's wrapper of process records
        return {k: _plain(v) for k, v in vars(value).items()}
    return value


def _read(pynvml: Any, call: str, *args: Any) -> Any:
    function = getattr(pynvml, call, None)
    if function is None:
        return {"error": "not in this nvidia-ml-py"}
    try:
        return _plain(function(*args))
    except pynvml.NVMLError as e:
        symbol = next(
            (
                n
                for n in dir(pynvml)
                if n.startswith("NVML_ERROR_") and getattr(pynvml, n) == e.value
            ),
            f"NVML error {e.value}",
        )
        return {"error": symbol}


def _proc(pid: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("cgroup",):
        try:
            out[name] = Path(f"/proc/{pid}/{name}").read_text()
        except OSError as e:
            out[name] = {"error": e.strerror}
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        out["NSpid"] = next(
            (line.split(":", 1)[1].split() for line in status if line.startswith("NSpid:")), None
        )
    except OSError as e:
        out["NSpid"] = {"error": e.strerror}
    return out


def _smi() -> Any:
    try:
        done = subprocess.run(  # noqa: S603 (fixed argv)
            ["nvidia-smi", "--query-compute-apps=pid,used_memory,gpu_uuid",
             "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": str(e)}
    return {
        "rc": done.returncode,
        "stdout": done.stdout.splitlines(),
        "stderr": done.stderr.strip(),
    }


def _stage(
    pynvml: Any, handle: Any, name: str, pids: dict[str, int], since_us: int
) -> dict[str, Any]:
    return {
        "stage": name,
        "time": time.time(),
        "memory": _read(pynvml, "nvmlDeviceGetMemoryInfo", handle),
        "memory_v2": _read(pynvml, "nvmlDeviceGetMemoryInfo", handle, pynvml.nvmlMemory_v2)
        if hasattr(pynvml, "nvmlMemory_v2")
        else None,
        "utilization": _read(pynvml, "nvmlDeviceGetUtilizationRates", handle),
        "compute_processes": _read(pynvml, "nvmlDeviceGetComputeRunningProcesses", handle),
        "graphics_processes": _read(pynvml, "nvmlDeviceGetGraphicsRunningProcesses", handle),
        "process_utilization_all": _read(pynvml, "nvmlDeviceGetProcessUtilization", handle, 0),
        "process_utilization_since_stage": _read(
            pynvml, "nvmlDeviceGetProcessUtilization", handle, since_us
        ),
        "smi_compute_apps": _smi(),
        "programs": {role: {"pid": pid, **_proc(pid)} for role, pid in pids.items()},
    }


def _expect(program: subprocess.Popen[str], word: str) -> None:
    assert program.stdout is not None
    line = program.stdout.readline().strip()
    if line != word:
        raise SystemExit(f"program {program.pid}: expected {word!r}, got {line!r}")


def _say(program: subprocess.Popen[str], line: str) -> None:
    assert program.stdin is not None
    program.stdin.write(line + "\n")
    program.stdin.flush()


def main(out: Path) -> int:
    import pynvml

    plan = PLAN
    reading: dict[str, Any] = {
        "what": "two CUDA programs on GPU 0 holding known allocations; NVML get calls only",
        "allocations_mib": plan,
        "spin_ms": 4000,
        "nvidia_ml_py": metadata.version("nvidia-ml-py"),
        "stages": [],
    }
    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        reading["driver"] = _read(pynvml, "nvmlSystemGetDriverVersion")
        reading["name"] = _read(pynvml, "nvmlDeviceGetName", handle)
        reading["mig_mode"] = _read(pynvml, "nvmlDeviceGetMigMode", handle)
        reading["symbols"] = {
            s: hasattr(pynvml.nvmlLib, s)
            for s in (
                "nvmlDeviceGetMemoryLimits_v1",
                "nvmlDeviceGetProcessesUtilizationInfo",
                "nvmlDeviceGetRunningProcessDetailList",
                "nvmlDeviceGetComputeRunningProcesses_v3",
            )
        }
        now_us = lambda: int(time.time() * 1e6)  # noqa: E731
        reading["stages"].append(_stage(pynvml, handle, "before", {}, now_us()))
        programs = {
            role: subprocess.Popen(  # noqa: S603 (this script, fixed argv)
                [sys.executable, __file__, "--child", str(mib)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )  # fmt: skip
            for role, mib in plan.items()
        }
        pids = {role: p.pid for role, p in programs.items()}
        try:
            for p in programs.values():
                _expect(p, "context")
            time.sleep(1)
            reading["stages"].append(_stage(pynvml, handle, "contexts only", pids, now_us()))
            for p in programs.values():
                _say(p, "go")
                _expect(p, "allocated")
            time.sleep(1)
            reading["stages"].append(_stage(pynvml, handle, "allocated, idle", pids, now_us()))
            start = now_us()
            _say(programs["busy"], f"spin {reading['spin_ms']}")
            _expect(programs["busy"], "spinning")
            time.sleep(2.5)
            reading["stages"].append(_stage(pynvml, handle, "busy program spinning", pids, start))
            _expect(programs["busy"], "spun")
            time.sleep(0.5)
            reading["stages"].append(_stage(pynvml, handle, "after the spin", pids, start))
            try:
                from kubectl_gpu import nvml  # kubectl-gpu's own reader, as the agent uses it

                with nvml.session() as session:
                    reading["kubectl_gpu_running_processes"] = list(session.running_processes(0))
            except Exception as e:  # noqa: BLE001 (a reading records what failed)
                reading["kubectl_gpu_running_processes"] = {"error": repr(e)}
        finally:
            for p in programs.values():
                if p.poll() is None:
                    _say(p, "exit")
            for p in programs.values():
                p.wait(timeout=30)
        time.sleep(1)
        reading["stages"].append(_stage(pynvml, handle, "programs ended", {}, now_us()))
    finally:
        pynvml.nvmlShutdown()
    out.write_text(json.dumps(reading, indent=1, sort_keys=True) + "\n")
    sys.stdout.write(
        json.dumps({s["stage"]: s["compute_processes"] for s in reading["stages"]}) + "\n"
    )
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(int(sys.argv[2]))
        sys.exit(0)
    sys.exit(main(Path(sys.argv[1])))
