"""Start-up wall time of `kubectl gpu --help` and `kubectl gpu validate`, against budgets.

Each command runs N times as a fresh process; the script prints medians and the ratio
to `python -c pass` measured in the same run (the interpreter's own start-up, which no
Python CLI can beat). Budgets are DESIGN.md's. Run: .venv/bin/python benchmarks/startup.py
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
EXAMPLE = ROOT / "tests" / "data" / "device-plugin" / "time-slicing-configmap-gpu-operator.yaml"
MIG_DEFAULT = (
    ROOT / "tests" / "data" / "mig" / "mig-parted__deployments__systemd__config-default.yaml"
)


def median_ms(argv: list[str], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def cases() -> list[tuple[str, list[str], float | None]]:
    gpu = str(BIN / "kubectl-gpu")
    rows: list[tuple[str, list[str], float | None]] = [
        ("python -c pass (baseline)", [sys.executable, "-c", "pass"], None),
        ("kubectl-gpu --help", [gpu, "--help"], 150.0),
        (
            "kubectl-gpu validate -f <GPU Operator ConfigMap>",
            [gpu, "validate", "-f", str(EXAMPLE)],
            250.0,
        ),
        (
            "kubectl-gpu validate -f <NVIDIA default MIG config>",
            [gpu, "validate", "-f", str(MIG_DEFAULT)],
            250.0,
        ),
    ]
    kubectl = shutil.which("kubectl")
    if kubectl:  # through kubectl's plugin dispatch, as users run it (kubectl's start-up included)
        rows.append(("kubectl gpu --help (via kubectl)", [kubectl, "gpu", "--help"], None))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=21)
    runs = parser.parse_args().runs
    env_path = f"{BIN}:{Path(shutil.which('kubectl') or '/usr/bin/kubectl').parent}"
    import os

    os.environ["PATH"] = env_path
    results = [(name, median_ms(argv, runs), budget) for name, argv, budget in cases()]
    baseline = results[0][1]
    print(f"{'command':<52} {'median ms':>10} {'x baseline':>11} {'budget ms':>10}  verdict")
    for name, ms, budget in results:
        verdict = "" if budget is None else ("pass" if ms <= budget else "MISS")
        shown = "" if budget is None else f"{budget:.0f}"
        print(f"{name:<52} {ms:>10.1f} {ms / baseline:>11.2f} {shown:>10}  {verdict}")
    print(f"({runs} runs each; machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
