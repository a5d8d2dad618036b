"""The real node agent as a process of a simulated node (test code only).

A DaemonSet pod on a real node runs the installed `kubectl-gpu-agent` with the driver's
libnvidia-ml and nvidia-smi that the NVIDIA container runtime gives it. Here the same entry
point runs unmodified: the node's driver root (tests/kit/node/libnvml/driver.py) puts the project's
`libnvidia-ml.so.1` on the linker's search path, where pynvml's own `CDLL("libnvidia-ml.so.1")`
finds it, and the node's `nvidia-smi` on PATH. Nothing is installed into the agent's process.

Owns the agent's command line (`agent_command`) and `spawn`, one agent against any API server
where no simulated kubelet starts it. Must not: pass the agent anything a DaemonSet pod would
not have.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.kit.node.libnvml.driver import lay_out

AGENT_PROGRAM = "kubectl-gpu-agent"


def agent_command() -> list[str]:
    """The installed entry point, as the agent's container runs it, made to end with the test
    that started it (on a real node the kubelet is its keeper): `setpriv --pdeathsig` sets the
    parent-death signal and then executes the agent itself in the same process."""
    script = Path(sys.executable).with_name(AGENT_PROGRAM)
    program = [str(script)] if script.is_file() else [sys.executable, "-m", "kubectl_gpu.agent"]
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", "--", *program] if setpriv else program


def spawn(
    kubeconfig: Path, node: str, index: int, directory: Path, *agent_args: str
) -> subprocess.Popen[bytes]:
    """The real agent of `node` (one L4) as a process of its own, against any API server; its
    log goes to `directory/agent.log`. Used where no simulated kubelet starts it (the real
    control plane's KWOK nodes, the fleet benchmark)."""
    from tests.kit.node.nodes import NodeSpec, SimNode

    (directory / "kubelet").mkdir(parents=True, exist_ok=True)
    driver = lay_out(directory / "driver")
    SimNode(NodeSpec(node, "L4", 1), index).share_state(driver.state)
    command = [
        *agent_command(), "--node-name", node, "--kubeconfig", str(kubeconfig),
        "--kubelet-root", str(directory / "kubelet"), "--heartbeat", str(directory / "heartbeat"),
        *agent_args,
    ]  # fmt: skip
    with (directory / "agent.log").open("w") as log:  # the child keeps its own descriptor
        return subprocess.Popen(  # noqa: S603 (fixed argv)
            command,
            cwd=directory,
            env={**os.environ, **driver.env()},
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
