"""Build `kubectl-gpu` as a single-file Python zipapp (python3 shebang, executable bit).

The package is copied with symlinks resolved, so `kubectl_gpu/schemas` (a link to the
top-level `schemas/`) ships as real files that importlib.resources reads from the zip.
Dependencies are not bundled here; `make release` decides what to vendor.
Usage: python scripts/build_zipapp.py OUTPUT
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import zipapp
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAIN = "from kubectl_gpu.cli import main\nmain()\n"


def build(output: Path) -> Path:
    """Write the zipapp to `output` and return its path."""
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp)
        shutil.copytree(
            ROOT / "kubectl_gpu",
            stage / "kubectl_gpu",
            symlinks=False,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
        (stage / "__main__.py").write_text(MAIN)
        zipapp.create_archive(stage, output, interpreter="/usr/bin/env python3", compressed=True)
    output.chmod(0o755)
    return output


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/build_zipapp.py OUTPUT")
    build(Path(sys.argv[1]))
