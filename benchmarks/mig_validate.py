"""Wall time of `kubectl gpu mig validate` of NVIDIA's default MIG config against every known
GPU model, against the 300 ms budget of docs/architecture.md.

Runs `kubectl-gpu mig validate -f <default config> --gpu <model> ...` (all 81 configs × every
model in kubectl_gpu.mig.models, one GPU each) as a fresh process, N times, and for scale
`python -c pass` (the interpreter's own start-up) and `kubectl-gpu validate -f <default
config>` (the same file, structure only; budget 250 ms). The commands take turns, so a busy
machine slows all of them alike; the script prints medians, ratios to the baseline and the
verdict. The exit status of mig validate is 1 (per-model configs do not fit other models);
only time is measured. Run: .venv/bin/python benchmarks/mig_validate.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DEFAULT = ROOT / "tests" / "data" / "mig" / "mig-parted__deployments__systemd__config-default.yaml"
BUDGET_MS = 300.0


def mig_validate(bin_dir: Path = BIN) -> list[str]:
    from kubectl_gpu.mig import models

    argv = [str(bin_dir / "kubectl-gpu"), "mig", "validate", "-f", str(DEFAULT)]
    for model in models.MODELS:
        argv += ["--gpu", model.key]
    return argv


def timed_ms(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return (time.perf_counter() - start) * 1000


def cases(bin_dir: Path = BIN) -> dict[str, tuple[list[str], float | None]]:
    """Command name → (argv, budget ms); the first is the baseline."""
    argv = mig_validate(bin_dir)
    return {
        "python -c pass (baseline)": ([str(bin_dir / "python"), "-c", "pass"], None),
        "kubectl-gpu validate -f <default> (for scale)": (
            [str(bin_dir / "kubectl-gpu"), "validate", "-f", str(DEFAULT)],
            250.0,
        ),
        f"kubectl-gpu mig validate -f <default> ({argv.count('--gpu')} models)": (argv, BUDGET_MS),
    }


def measure(runs: int, bin_dir: Path = BIN) -> dict[str, float]:
    """Median ms of every case over `runs`, the commands taking turns."""
    return {name: statistics.median(taken) for name, taken in samples(runs, bin_dir).items()}


def samples(runs: int, bin_dir: Path = BIN) -> dict[str, list[float]]:
    """Every run's ms for every case, the commands taking turns (load hits each alike)."""
    commands = cases(bin_dir)
    taken: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, (command, _budget) in commands.items():
            taken[name].append(timed_ms(command))
    return taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=21)
    runs = parser.parse_args().runs
    argv = mig_validate()
    medians = measure(runs)
    baseline = medians["python -c pass (baseline)"]
    print(f"{'command':<58} {'median ms':>10} {'x baseline':>11} {'budget ms':>10}  verdict")
    for name, (_command, budget) in cases().items():
        ms = medians[name]
        verdict = "" if budget is None else ("pass" if ms <= budget else "MISS")
        shown = "" if budget is None else f"{budget:.0f}"
        print(f"{name:<58} {ms:>10.1f} {ms / baseline:>11.2f} {shown:>10}  {verdict}")
    checked = subprocess.run(argv, capture_output=True, text=True, check=False)
    print(f"({checked.stderr.strip().splitlines()[-1]}; exit status {checked.returncode})")
    print(f"({runs} runs each; machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
