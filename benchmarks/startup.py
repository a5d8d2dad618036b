"""Start-up wall time of `kubectl gpu --help` and `kubectl gpu validate`, against budgets.

Each command runs N times as a fresh process; the script prints medians and the ratio
to `python -c pass` measured in the same run (the interpreter's own start-up, which no
Python CLI can beat). Budgets: docs/architecture.md. `--installed` measures a regular wheel install
in a temporary venv (see `regular_install`) instead of .venv's editable install, whose import
finder costs every start-up some 20 ms that users never pay.
Run: .venv/bin/python benchmarks/startup.py [--runs N] [--installed]
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
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


def regular_install(folder: Path) -> Path:
    """A regular (non-editable) install of this checkout in a venv under `folder`; returns its
    bin directory. The wheel is built and installed with --no-deps; the dependencies are
    .venv's, reached through a .pth line (paths named in a .pth are added to sys.path but not
    scanned for .pth files, so .venv's editable-install finder stays out of the measurement)."""
    venv, dist = folder / "venv", folder / "dist"
    run = functools.partial(subprocess.run, check=True, stdout=subprocess.DEVNULL)
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    run([*wheel, "-w", str(dist), str(ROOT)])
    built = next(dist.glob("kubectl_gpu-*.whl"))
    install = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]
    run([*install, "install", "-q", "--no-deps", str(built)])
    major, minor = sys.version_info[:2]
    site = venv / "lib" / f"python{major}.{minor}" / "site-packages"
    deps = sysconfig.get_paths()["purelib"]
    (site / "zz-dependencies-from-dev-venv.pth").write_text(deps + "\n")
    return venv / "bin"


def cases(bin_dir: Path = BIN) -> list[tuple[str, list[str], float | None]]:
    """(command, argv, budget ms) for every case; the first is the baseline: the same
    interpreter's own start-up (`python -c pass`)."""
    gpu = str(bin_dir / "kubectl-gpu")
    python = str(bin_dir / "python")
    rows: list[tuple[str, list[str], float | None]] = [
        ("python -c pass (baseline)", [python, "-c", "pass"], None),
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


def measure(runs: int, bin_dir: Path = BIN) -> list[tuple[str, float, float | None]]:
    """(command, median ms, budget ms) for every case; the first row is the baseline."""
    return [
        (name, statistics.median(taken), budget) for name, taken, budget in samples(runs, bin_dir)
    ]


def samples(runs: int, bin_dir: Path = BIN) -> list[tuple[str, list[float], float | None]]:
    """(command, every run's ms, budget ms) for every case; the first row is the baseline. The
    commands take turns, so load on the machine hits each alike."""
    kubectl_dir = Path(shutil.which("kubectl") or "/usr/bin/kubectl").parent
    os.environ["PATH"] = f"{bin_dir}:{kubectl_dir}:{os.environ.get('PATH', '')}"
    rows = cases(bin_dir)
    taken: list[list[float]] = [[] for _ in rows]
    for _ in range(runs):
        for times, (_name, argv, _budget) in zip(taken, rows, strict=True):
            times.append(median_ms(argv, 1))
    return [(name, times, budget) for times, (name, _argv, budget) in zip(taken, rows, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument(
        "--installed",
        action="store_true",
        help="measure a regular (wheel) install in a temporary venv, not .venv's editable one",
    )
    options = parser.parse_args()
    runs = options.runs
    with tempfile.TemporaryDirectory() as tmp:
        bin_dir = regular_install(Path(tmp)) if options.installed else BIN
        results = measure(runs, bin_dir)
    baseline = results[0][1]
    print(f"{'command':<52} {'median ms':>10} {'x baseline':>11} {'budget ms':>10}  verdict")
    for name, ms, budget in results:
        verdict = "" if budget is None else ("pass" if ms <= budget else "MISS")
        shown = "" if budget is None else f"{budget:.0f}"
        print(f"{name:<52} {ms:>10.1f} {ms / baseline:>11.2f} {shown:>10}  {verdict}")
    print(f"({runs} runs each; machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
