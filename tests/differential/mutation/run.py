"""Apply each mutant of mutants.py in turn, run the differential suite, report kills.

    python -m tests.differential.mutation.run [--examples N] [--only SUBSTRING]

The work tree is restored after each mutant (and on interrupt). Each run is the CI draw
(fixed seed) of KUBECTL_GPU_DIFFERENTIAL_EXAMPLES configs plus the corpus.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.differential.mutation.mutants import MUTANTS

ROOT = Path(__file__).resolve().parents[3]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", default="1000")
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    env = dict(os.environ, KUBECTL_GPU_DIFFERENTIAL_EXAMPLES=args.examples)
    killed = survived = 0
    for file, before, after, what in MUTANTS:
        if args.only not in what:
            continue
        path = ROOT / file
        original = path.read_text("utf-8")
        if original.count(before) != 1:
            print(f"STALE  {file}: {what} (the line is not there once)", flush=True)
            continue
        path.write_text(original.replace(before, after), "utf-8")
        started = time.monotonic()
        try:
            run = subprocess.run(
                [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                 "tests/differential"],
                cwd=ROOT, env=env, capture_output=True, text=True, check=False,
            )  # fmt: skip
        finally:
            path.write_text(original, "utf-8")
        seconds = time.monotonic() - started
        if run.returncode == 0:
            survived += 1
            print(f"SURVIVED {file}: {what} ({seconds:.0f} s)", flush=True)
        else:
            killed += 1
            print(f"killed   {file}: {what} ({seconds:.0f} s)", flush=True)
    total = killed + survived
    print(f"{killed} of {total} mutants killed ({100 * killed / max(total, 1):.0f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
