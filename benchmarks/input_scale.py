"""Scaling check of every reader: time and peak memory at 1k, 10k and 100k entries.

Budget (docs/architecture.md): "every reader (YAML, checkpoint, reports, ConfigMaps): cost linear in
input size; 100,000 checkpoint entries <= 3 s, a 10,000-key ConfigMap <= 3 s, peak <= 400 MiB". Each
case runs in a fresh process (`kubectl-gpu ...`, as a user runs it) on a synthetic input written to
a temp directory; the table shows wall and CPU seconds, peak RSS (MiB, from the child's rusage)
and the growth of CPU time per 10x more entries (10 means linear; 100 would be quadratic; less
than 10 where start-up dominates or an input cap stops the reader). Inputs:

- checkpoint: `map --checkpoint FILE` on kubelet's format, N allocations of time-sliced replicas
  over 8 GPUs (each pod one `GPU-<uuid>::<n>`); a tenth of the IDs registered (all of them would
  take 100,000 entries past the reader's 16 MiB cap), so 90 % of the allocations are reported
  as held on a device that is no longer healthy: N findings too;
- configmap: `validate -f FILE` on a ConfigMap of N keys, each a small device-plugin config;
- unknown-keys: `validate -f FILE` on a device-plugin config with N unknown keys under flags
  (N findings, each located and with a did-you-mean);
- documents: `validate -f FILE` on N YAML documents (the reader stops at 10,000 with a finding).

Inputs over 4 MiB (`validate`) or 16 MiB (checkpoints) are refused at once: that row then
measures the refusal.

Run: .venv/bin/python -m benchmarks.input_scale [--sizes 1000 10000 100000]
Never imported by tests; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

BIN = Path(sys.executable).parent
GPUS = 8


def checkpoint(n: int) -> str:
    gpus = [f"GPU-{uuid.UUID(int=g + 1)}" for g in range(GPUS)]
    ids = [f"{gpus[i % GPUS]}::{i // GPUS}" for i in range(n)]
    entries = [
        {
            "PodUID": f"p{i}",  # short: 100,000 entries stay under the reader's 16 MiB cap
            "ContainerName": "c",
            "ResourceName": "nvidia.com/gpu",
            "DeviceIDs": [device_id],  # the pre-1.20 flat form, shorter
        }
        for i, device_id in enumerate(ids)
    ]
    # RegisteredDevices would list every ID again: 100,000 entries would pass the 16 MiB cap
    data = {"PodDeviceEntries": entries, "RegisteredDevices": {"nvidia.com/gpu": ids[: n // 10]}}
    return json.dumps({"Data": data, "Checksum": 1}, separators=(",", ":"))


def configmap(n: int) -> str:
    value = "    version: v1\n    sharing:\n      timeSlicing:\n        resources:\n"
    keys = "".join(
        f"  cfg-{i}: |-\n{value}        - name: nvidia.com/gpu\n          replicas: {2 + i % 8}\n"
        for i in range(n)
    )
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plugin\ndata:\n{keys}"


def unknown_keys(n: int) -> str:
    return "version: v1\nflags:\n" + "".join(f"  k{i}: {i}\n" for i in range(n))


def documents(n: int) -> str:
    return "---\nversion: v1\n" * n


CASES: dict[str, tuple[Callable[[int], str], list[str]]] = {
    "checkpoint (map --checkpoint)": (checkpoint, ["map", "--checkpoint"]),
    "configmap keys (validate)": (configmap, ["validate", "-f"]),
    "unknown keys (validate)": (unknown_keys, ["validate", "-f"]),
    "documents (validate)": (documents, ["validate", "-f"]),
}


# A child of its own measures one command: RUSAGE_CHILDREN's peak is the largest of any child.
_MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
used = resource.getrusage(resource.RUSAGE_CHILDREN)
print(time.perf_counter() - start, used.ru_utime + used.ru_stime, used.ru_maxrss)
"""


def run(argv: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS in MiB of one command, as a fresh process."""
    measured = subprocess.run(
        [sys.executable, "-c", _MEASURE, *argv], capture_output=True, text=True, check=True
    )
    wall, cpu, peak_kib = measured.stdout.split()
    return float(wall), float(cpu), int(peak_kib) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    args = parser.parse_args()
    head = f"{'input':32} {'entries':>8} {'bytes':>10} {'wall s':>7} {'CPU s':>6} {'peak MiB':>9}"
    print(f"{head} {'x CPU':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (make, command) in CASES.items():
            last: float | None = None
            for size in sorted(args.sizes):
                path = Path(tmp) / f"{name.split()[0]}-{size}"
                path.write_text(make(size))
                wall, cpu, peak = run([str(BIN / "kubectl-gpu"), *command, str(path)])
                growth = f"{cpu / last:6.1f}" if last else ""
                row = f"{name:32} {size:8} {os.path.getsize(path):10} {wall:7.2f} {cpu:6.2f}"
                print(f"{row} {peak:9.0f} {growth}")
                last = cpu


if __name__ == "__main__":
    main()
