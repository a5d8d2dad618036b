"""Cluster commands through the krew-installed archive against the same commands installed
from a wheel, on a simulated cluster (the real control plane).

The archive is a zipapp; zipimport finds no bytecode it can use there, so before the archive
unpacked itself into the user's cache every command compiled the Kubernetes client from source
(scripts/release.py, MAIN); later, the vendored client's eager package `__init__`s and the zip's
2,250-entry directory cost it 1.3-1.6 × the venv (docs/performance.md). This measures `status`,
`map -A` and `validate -f` both ways: the archive installed as krew installs it (extracted; run
by the same interpreter as the wheel install, so only the packaging differs) with a fresh cache
(its first run unpacks and compiles, reported on its own) and then warm, against a regular wheel
install (benchmarks/startup.py `regular_install`). Budget: ≤ 1.3 × the venv
(docs/architecture.md).
The control plane's binaries must be on PATH, as for the tests.
Run: .venv/bin/python -m benchmarks.krew_startup [--archive DIST.tar.gz] [--runs N]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from benchmarks.startup import EXAMPLE, regular_install
from tests.kit.cluster import NodeSpec, SimCluster

ROOT = Path(__file__).resolve().parent.parent
BUDGET = 1.3
PLAIN = "version: v1\nflags:\n  migStrategy: none\n"


def build(folder: Path) -> Path:
    """The release archive as `make release` builds it (dependencies from PyPI)."""
    spec = importlib.util.spec_from_file_location("release", ROOT / "scripts" / "release.py")
    assert spec and spec.loader
    release = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(release)
    return Path(release.build(folder / "dist", "pypi", None))


def install(archive: Path, folder: Path) -> Path:
    """Extracted as krew extracts it (modes kept); the executable."""
    with tarfile.open(archive) as tar:
        tar.extractall(folder / "store", filter="tar")
    return folder / "store" / "kubectl-gpu"


def once(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, check=False)
    if done.returncode not in (0, 1) or b"Traceback" in done.stderr:  # status: 1, no agent
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-400:]!r}")
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--archive", type=Path, help="a built release archive (default: build)")
    parser.add_argument("--runs", type=int, default=11)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        app = install(options.archive or build(folder), folder)
        venv = regular_install(folder / "venv")
        cluster = SimCluster(
            [NodeSpec("gpu-a", "L4", 2), NodeSpec("gpu-b", "A100-SXM4-80GB", 2)],
            "helm", {"any": PLAIN}, "any", kubeconfig=folder / "kubeconfig",
        )  # fmt: skip
        cluster.start()
        try:
            report(app, venv, folder, options.runs)
        finally:
            cluster.stop()


def report(app: Path, venv: Path, folder: Path, runs: int) -> None:
    env = {**os.environ, "KUBECONFIG": str(folder / "kubeconfig"), "HOME": str(folder)}
    env["XDG_CACHE_HOME"] = str(folder / "cache")
    cases = {
        "status": ["status"],
        "map -A": ["map", "-A"],
        "validate -f <GPU Operator ConfigMap>": ["validate", "-f", str(EXAMPLE)],
    }
    # the archive runs under the venv's own interpreter, so both pay the same interpreter and
    # site start-up (a system python3 with many site-packages costs tens of ms more to start,
    # whatever it runs): the difference is the packaging alone
    krew = [str(venv / "python"), str(app)]
    first = once([*krew, *cases["status"]], env)  # unpacks (and compiles)
    print(f"krew archive, first command with an empty cache (status): {first:.0f} ms")
    print(f"{'command':<40} {'venv ms':>8} {'krew ms':>8} {'ratio':>6}  verdict")
    for name, args in cases.items():
        venv_ms, krew_ms = [], []
        for _ in range(runs):  # taking turns, so load hits both alike
            venv_ms.append(once([str(venv / "kubectl-gpu"), *args], env))
            krew_ms.append(once([*krew, *args], env))
        v, k = statistics.median(venv_ms), statistics.median(krew_ms)
        verdict = "pass" if k <= BUDGET * v else "MISS"
        print(f"{name:<40} {v:>8.0f} {k:>8.0f} {k / v:>6.2f}  {verdict}")
    load = os.getloadavg()[0]
    print(f"({runs} runs each; load average {load:.1f}; Python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
