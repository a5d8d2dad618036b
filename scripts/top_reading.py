"""Check, read-only on a real GPU, that `kubectl gpu top`'s agent-side reader attributes each
process's memory and SM % correctly; keep what it read as a JSON fixture.

Run on a node with a real GPU: `PYTHONPATH=. python3 scripts/top_reading.py OUT.json`. It starts
two CUDA programs (`scripts/gpu_process_reading.py --child`, or its own copy when that script is
absent: the CUDA driver API through ctypes, a context, then 1024 and 4096 MiB of its own
allocations; the first then spins a kernel for 4 s)
and, while they hold their memory and the first spins, reads the GPU with kubectl-gpu's own
`nvml.Session.usage` (the call the agent's `/v1/usage` makes) and each process's
`/proc/PID/cgroup` through `usage.cgroups`, then checks that each program's memory is its
context plus what it allocated (to the byte, up to the context's size read when it has no
allocation), that only the spinning one has SM % above 0 and the GPU's total is not charged to
either. Only NVML get calls: no MIG mode change, no instance, no reset.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

MIB = 2**20
PLAN = {"busy": 1024, "idle": 4096}
CHILD = Path(__file__).with_name("gpu_process_reading.py")
_SPIN = (
    b".version 7.0\n.target sm_70\n.address_size 64\n.visible .entry spin(.param .u64 ns)\n{\n"
    b".reg .pred %p<2>;\n.reg .b64 %rd<6>;\nld.param.u64 %rd1, [ns];\nmov.u64 %rd2, %globaltimer;\n"
    b"$L:\nmov.u64 %rd3, %globaltimer;\nsub.s64 %rd4, %rd3, %rd2;\nsetp.lt.u64 %p1, %rd4, %rd1;\n"
    b"@%p1 bra $L;\nret;\n}\n"
)


def _tell(word: str) -> None:
    sys.stdout.write(word + "\n")
    sys.stdout.flush()


def child(mib: int) -> None:
    """A CUDA program: a context, `mib` MiB of its own, a busy kernel when told."""
    import ctypes

    cuda = ctypes.CDLL("libcuda.so.1")
    device, context, pointer = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    for result in (
        cuda.cuInit(0),
        cuda.cuDeviceGet(ctypes.byref(device), 0),
        cuda.cuCtxCreate_v2(ctypes.byref(context), 0, device),
    ):
        assert result == 0, result
    _tell("context")
    sys.stdin.readline()
    size = ctypes.c_size_t(mib * MIB)
    assert cuda.cuMemAlloc_v2(ctypes.byref(pointer), size) == 0
    assert cuda.cuMemsetD8_v2(pointer, ctypes.c_ubyte(1), size) == 0
    assert cuda.cuCtxSynchronize() == 0
    _tell("allocated")
    for line in sys.stdin:
        if not line.startswith("spin"):
            break
        assert cuda.cuModuleLoadData(ctypes.byref(module), _SPIN) == 0
        assert cuda.cuModuleGetFunction(ctypes.byref(function), module, b"spin") == 0
        ns = ctypes.c_uint64(int(line.split()[1]) * 1_000_000)
        params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(ns), ctypes.c_void_p))
        assert cuda.cuLaunchKernel(function, 528, 1, 1, 256, 1, 1, 0, None, params, None) == 0
        _tell("spinning")
        assert cuda.cuCtxSynchronize() == 0
        _tell("spun")


def _expect(program: subprocess.Popen[str], word: str) -> None:
    assert program.stdout is not None
    line = program.stdout.readline().strip()
    if line != word:
        raise SystemExit(f"program {program.pid}: expected {word!r}, got {line!r}")


def _say(program: subprocess.Popen[str], line: str) -> None:
    assert program.stdin is not None
    program.stdin.write(line + "\n")
    program.stdin.flush()


def _read(stage: str, pids: dict[str, int]) -> dict[str, Any]:
    from kubectl_gpu import nvml
    from kubectl_gpu.usage import cgroups

    with nvml.session() as session:
        gpus = session.usage(int(time.time() * 1e6) - 2_000_000)
    gpu = gpus[0]
    mine = {p.pid: p for p in gpu.processes}
    cgroup = {}
    for role, pid in pids.items():
        text = Path(f"/proc/{pid}/cgroup").read_text()
        found = cgroups.parse(text)
        cgroup[role] = {"text": text, "pod": dataclasses.asdict(found) if found else None}
    return {
        "stage": stage,
        "gpu": {k: v for k, v in dataclasses.asdict(gpu).items() if k != "processes"},
        "processes": {
            role: dataclasses.asdict(mine[pid]) if pid in mine else None
            for role, pid in pids.items()
        },
        "cgroup": cgroup,
    }


def main(out: Path) -> int:
    programs = {
        role: subprocess.Popen(  # noqa: S603 (fixed argv, no shell)
            [sys.executable, str(CHILD if CHILD.exists() else __file__), "--child", str(mib)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for role, mib in PLAN.items()
    }
    pids = {role: p.pid for role, p in programs.items()}
    stages = []
    try:
        for p in programs.values():
            _expect(p, "context")
        time.sleep(1)
        stages.append(_read("contexts only", pids))
        for p in programs.values():
            _say(p, "go")
            _expect(p, "allocated")
        time.sleep(1)
        stages.append(_read("allocated, idle", pids))
        _say(programs["busy"], "spin 4000")
        _expect(programs["busy"], "spinning")
        time.sleep(2.5)
        stages.append(_read("busy program spinning", pids))
        _expect(programs["busy"], "spun")
    finally:
        for p in programs.values():
            if p.poll() is None:
                _say(p, "exit")
        for p in programs.values():
            p.wait(timeout=30)
    checks = _checks(stages)
    out.write_text(json.dumps({"plan_mib": PLAN, "stages": stages, "checks": checks}, indent=1))
    sys.stdout.write(json.dumps(checks, indent=1) + "\n")
    return 0 if all(checks.values()) else 1


def _checks(stages: list[dict[str, Any]]) -> dict[str, bool]:
    context, allocated, spinning = stages
    found = {}
    for role, mib in PLAN.items():
        base = context["processes"][role]["used_memory"]
        found[f"{role}: memory is context + {mib} MiB"] = (
            allocated["processes"][role]["used_memory"] == base + mib * MIB
        )
    busy, idle = spinning["processes"]["busy"], spinning["processes"]["idle"]
    found["busy: SM % above 0 while spinning"] = (busy["sm_percent"] or 0) > 0
    found["idle: no SM % charged while the other spins"] = not idle["sm_percent"]
    found["GPU total is more than either process"] = (spinning["gpu"]["memory_used"] or 0) > max(
        busy["used_memory"], idle["used_memory"]
    )
    return found


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(int(sys.argv[2]))
        sys.exit(0)
    sys.exit(main(Path(sys.argv[1])))
