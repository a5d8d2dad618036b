"""`python -m tests.fakes.node.agent --gpu-state FILE -- AGENT-ARGS…`: the real node agent on a
simulated node (test code only).

A DaemonSet pod on a real node gets the driver's libnvidia-ml and nvidia-smi from the NVIDIA
container runtime; here the launcher gives the same process the node's NVML stand-in (the shared
GPU state file behind pynvml's own symbol lookup) and `nvidia-smi` on PATH, then calls the
agent's real entry point `kubectl_gpu.agent.main` with the container's arguments. Owns nothing
else: the agent must not know it is simulated.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from tests.fakes import libnvml
from tests.fakes.libnvml.statefile import GpuStateFile, load_library
from tests.fakes.node.smi import STATE_ENV

_REPO_ROOT = Path(__file__).resolve().parents[3]


def _die_with(parent: int) -> None:
    """End this process when the simulated cluster that started it is gone: a node agent
    must never outlive its test (on a real node the kubelet is its parent's keeper)."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.node.agent")
    parser.add_argument("--gpu-state", type=Path, required=True)
    parser.add_argument("agent_args", nargs=argparse.REMAINDER)
    options = parser.parse_args(argv)
    args = options.agent_args[1:] if options.agent_args[:1] == ["--"] else options.agent_args
    threading.Thread(target=_die_with, args=(os.getppid(),), daemon=True).start()
    os.environ[STATE_ENV] = str(options.gpu_state)  # what nvidia-smi, run by the agent, reads
    libnvml.install(load_library(GpuStateFile(options.gpu_state)))

    from kubectl_gpu import agent  # after the stand-in is in place, as the driver is on a node

    return agent.main(args)


def spawn(
    kubeconfig: Path, node: str, index: int, directory: Path, *agent_args: str
) -> subprocess.Popen[bytes]:
    """The real agent of `node` (one L4, the NVML stand-in) as a process of its own, against
    any API server; its log goes to `directory/agent.log`. Used where no simulated kubelet
    starts it (the real control plane's KWOK nodes, the fleet benchmark)."""
    from tests.fakes.cluster.nodes import NodeSpec, SimNode

    (directory / "kubelet").mkdir(parents=True, exist_ok=True)
    SimNode(NodeSpec(node, "L4", 1), index).share_state(directory / "gpus.json")
    command = [
        sys.executable, "-m", "tests.fakes.node.agent", "--gpu-state", str(directory / "gpus.json"),
        "--", "--node-name", node, "--kubeconfig", str(kubeconfig),
        "--kubelet-root", str(directory / "kubelet"), "--heartbeat", str(directory / "heartbeat"),
        *agent_args,
    ]  # fmt: skip
    with (directory / "agent.log").open("w") as log:  # the child keeps its own descriptor
        return subprocess.Popen(  # noqa: S603 (fixed argv)
            command,
            cwd=_REPO_ROOT,
            env={**os.environ, "PYTHONPATH": str(_REPO_ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=log,
        )


if __name__ == "__main__":
    sys.exit(main())
