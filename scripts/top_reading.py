"""Check, read-only on a real GPU, that `kubectl gpu top`'s agent-side reader attributes each
process's memory and SM % correctly; keep what it read as a JSON fixture.

Run on a node with a real GPU: `PYTHONPATH=. python3 scripts/top_reading.py OUT.json`. It starts
the two CUDA programs of `scripts/gpu_process_reading.py` (the CUDA driver API through ctypes, a
context, then 1024 and 4096 MiB of their own allocations; the first then spins a kernel for 4 s)
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

import gpu_process_reading as programs_of  # beside this script: its CUDA programs

MIB = 2**20
PLAN = programs_of.PLAN
CHILD = Path(programs_of.__file__)
_expect, _say = programs_of._expect, programs_of._say


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
            [sys.executable, str(CHILD), "--child", str(mib)],
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
    sys.exit(main(Path(sys.argv[1])))
