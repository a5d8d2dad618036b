"""A YAML input is bounded in the memory it may cost, not only in its bytes: a 4 MiB file of
two million values (a flow list of device indexes) is refused, naming the limit, before a
single YAML node is built; it took `mig plan` to 1.2 GiB and two minutes when the value count
was checked only after composing the document. Run as a user runs it, in a process of its
own, whose peak memory the kernel reports."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from kubectl_gpu import documents

BIN = Path(sys.executable).parent
MEASURE = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=60, check=False)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(done.stdout + done.stderr)
"""


def _flow_list(path: Path, size: int) -> Path:
    values = ",".join(["0"] * ((size - 100) // 2))
    path.write_text(
        f"version: v1\nmig-configs:\n  c:\n  - devices: [{values}]\n    mig-enabled: false\n"
    )
    return path


def _block_list(path: Path, size: int) -> Path:
    lines = "".join("    - 0\n" for _ in range((size - 100) // 8))
    path.write_text(
        f"version: v1\nmig-configs:\n  c:\n  - devices:\n{lines}    mig-enabled: false\n"
    )
    return path


@pytest.mark.timeout(90)
@pytest.mark.parametrize("make", [_flow_list, _block_list], ids=["flow", "block"])
@pytest.mark.parametrize("command", [["mig", "plan", "--gpu", "H100-80GB"], ["validate"]])
def test_a_file_of_millions_of_values_is_refused_before_it_is_built(
    tmp_path: Path, make: object, command: list[str]
) -> None:
    path = make(tmp_path / "huge.yaml", 4 * 1024 * 1024 - 4096)  # type: ignore[operator]
    argv = [str(BIN / "kubectl-gpu"), *command, "-f", str(path)]

    measured = subprocess.run(
        [sys.executable, "-c", MEASURE, *argv], capture_output=True, text=True, timeout=80
    )

    status, peak_kib = measured.stdout.split("\n", 1)[0].split()
    assert status == "1", measured.stdout
    assert f"more than {documents.MAX_NODES} values" in measured.stdout
    assert int(peak_kib) < 150 * 1024, f"peak {int(peak_kib) // 1024} MiB"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0
