"""Running NVIDIA's own config code (../shared/oracles, built from upstream's sources) on files.

Each oracle takes many files per run and prints one JSON verdict per file; this module writes
a batch of texts to a temporary directory, runs the oracle once, and returns the verdicts in
order. The binaries stay where they are: they are never copied into the repository.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

ORACLES = Path(__file__).resolve().parents[3] / "shared" / "oracles"
DEVICE_PLUGIN = ORACLES / "dp-oracle"
MIG_PARTED = ORACLES / "mig-oracle"
MISSING = f"NVIDIA's config code is not built on this machine ({ORACLES} is absent)"


def available() -> bool:
    return DEVICE_PLUGIN.is_file() and MIG_PARTED.is_file()


def verdicts(program: Path, texts: list[str]) -> list[dict[str, Any]]:
    """The oracle's verdict on each text, in order."""
    with tempfile.TemporaryDirectory(prefix="oracle-") as tmp:
        names = []
        for index, text in enumerate(texts):
            path = Path(tmp) / f"{index:05d}.yaml"
            path.write_text(text, "utf-8")
            names.append(str(path))
        run = subprocess.run(
            [str(program), *names], capture_output=True, text=True, timeout=60, check=False
        )
    by_file = {}
    for line in run.stdout.splitlines():
        verdict = json.loads(line)
        by_file[verdict["file"]] = verdict
    assert len(by_file) == len(names), run.stderr
    return [by_file[name] for name in names]
