"""Which of the agent's node-side flags the simulated kubelet passes it: `--proc-root` (where
the node's processes are read) and `--usage-port` (the read-only endpoint `kubectl gpu top` reads
through the API server's pod proxy), once the installed agent has them.

Owns reading the agent's own `--help` (once per process) and the flag values for one node: its
/proc stand-in, and port 9402 where the node has a network namespace of its own, 0 (off) where it
has none, since every node's agent would then share the host's ports. Must not start the agent.
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from pathlib import Path

USAGE_PORT = 9402
REPO_ROOT = Path(__file__).resolve().parents[3]


@functools.cache
def accepted() -> frozenset[str]:
    """The long flags the installed agent accepts."""
    result = subprocess.run(  # noqa: S603 (fixed argv, no shell)
        [sys.executable, "-m", "kubectl_gpu.agent", "--help"],
        capture_output=True, text=True, timeout=60, check=False, cwd=REPO_ROOT,
    )  # fmt: skip
    return frozenset(re.findall(r"(--[a-z][a-z0-9-]+)", result.stdout))


def usage_flags(proc_root: Path, *, networked: bool) -> list[str]:
    if not {"--usage-port", "--proc-root"} <= accepted():
        return []
    return ["--proc-root", str(proc_root), "--usage-port", str(USAGE_PORT if networked else 0)]
