"""Running the config oracles the project builds (tests/oracles/, via scripts/gobins.py) on files.

Each oracle takes many files per run and prints one JSON verdict per file; this module writes
a batch of texts to a temporary directory, runs the oracle once, and returns the verdicts in
order. The binaries are built once per machine into gobins' cache (a session-scoped fixture
asks for them); where Go is missing or the module proxy cannot be reached, the tests that need
them skip with the reason tests/kit/kube/builds.py gives.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.kit.kube import builds

DEVICE_PLUGIN = "device-plugin-oracle"
MIG_PARTED = "mig-parted-oracle"
DRA_DRIVER = "dra-driver-oracle"
CEL = "cel-oracle"


def build(name: str) -> Path:
    """The oracle's binary, built first if this machine's cache lacks it (builds.NotBuilt)."""
    return builds.program(name)


def verdicts(program: Path, texts: list[str] | list[bytes], *options: str) -> list[dict[str, Any]]:
    """The oracle's verdict on each text (UTF-8), or each file's bytes, in order."""
    with tempfile.TemporaryDirectory(prefix="oracle-") as tmp:
        names = []
        for index, text in enumerate(texts):
            path = Path(tmp) / f"{index:05d}.yaml"
            path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
            names.append(str(path))
        run = subprocess.run(
            [str(program), *options, *names],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    by_file = {}
    for line in filter(None, run.stdout.split("\n")):  # not splitlines: U+0085 is text
        verdict = json.loads(line)
        by_file[verdict["file"]] = verdict
    assert len(by_file) == len(names), run.stderr
    return [by_file[name] for name in names]
