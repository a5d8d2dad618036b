"""The agent's node-side flags the simulated kubelet passes it: `--proc-root` (where the node's
processes are read) and `--usage-port` (the read-only endpoint `kubectl gpu top` reads through
the API server's pod proxy).

Owns the flag values for one node: its /proc stand-in, and port 9402 where the node has a
network namespace of its own, 0 (off) where it has none, since every node's agent would then
share the host's ports. Must not start the agent.
"""

from __future__ import annotations

from pathlib import Path

USAGE_PORT = 9402


def usage_flags(proc_root: Path, *, networked: bool) -> list[str]:
    return ["--proc-root", str(proc_root), "--usage-port", str(USAGE_PORT if networked else 0)]
