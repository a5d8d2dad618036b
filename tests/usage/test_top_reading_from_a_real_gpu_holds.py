"""What kubectl-gpu's reader made of a real H200 (tests/data/nvml/…-top-reading.json, taken
with scripts/top_reading.py): each process's memory is its context plus its allocation, the
SM % is the spinning process's own, and the programs' cgroup names no pod; the rows `top` would
build from it charge neither program with the other's figures."""

from __future__ import annotations

import json

from kubectl_gpu.usage import cgroups, view
from kubectl_gpu.usage.document import Attributed, NodeUsage
from kubectl_gpu.usage.readings import GpuReading, ProcessReading
from tests.conftest import ROOT

READING = json.loads(
    (ROOT / "tests" / "data" / "nvml" / "h200-driver-580.159.04-top-reading.json").read_text()
)
MIB = 2**20


def test_every_check_passed_on_the_real_gpu() -> None:
    assert READING["checks"] and all(READING["checks"].values())


def test_memory_is_context_plus_allocation_to_the_byte() -> None:
    context, allocated, _ = READING["stages"]
    for role, mib in READING["plan_mib"].items():
        base = context["processes"][role]["used_memory"]
        assert allocated["processes"][role]["used_memory"] == base + mib * MIB


def test_a_process_outside_kubelets_cgroups_is_in_no_pod() -> None:
    for found in READING["stages"][0]["cgroup"].values():
        assert cgroups.parse(found["text"]) is None


def test_tops_rows_from_the_reading_keep_each_programs_own_figures() -> None:
    spinning = READING["stages"][2]
    gpu = GpuReading(**{**spinning["gpu"], "mig_devices": ()})
    processes = tuple(
        (gpu.uuid, Attributed(ProcessReading(**p))) for p in spinning["processes"].values()
    )
    usage = NodeUsage("h200", "test", "2026-11-28T00:00:00Z", (gpu,), processes, ())
    rows = view.make(usage, (), None)
    strays = {r.pids[0]: r for r in rows if r.kind == view.NO_POD}
    busy, idle = (spinning["processes"][k] for k in ("busy", "idle"))
    assert strays[busy["pid"]].sm_percent == 100
    assert (
        strays[idle["pid"]].sm_percent is None
        and strays[idle["pid"]].memory_used == idle["used_memory"]
    )
