"""The node agent (`kubectl-gpu-agent`, a DaemonSet): reconciles its own node's MIG layout.

Owns the entry point and its options: `--node-name` (default $NODE_NAME, from the downward
API), `--kubelet-root`, `--namespace`, `--interval`, `--timeout`, `--once`; the loop calls
`reconcile.reconcile` every interval and never stops on an error it can report. Must not hold
rules (mig.plan and mig.apply decide) nor import pynvml/kubernetes itself (the adapters do).
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from kubectl_gpu import cluster, errors, keys, kubelet, nvml
from kubectl_gpu.agent import reconcile

log = logging.getLogger("kubectl_gpu.agent")
_SMI_TIMEOUT = 120.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubectl-gpu-agent", description=__doc__.split("\n")[0])
    parser.add_argument("--node-name", default=os.environ.get("NODE_NAME", ""))
    parser.add_argument("--kubelet-root", type=Path, default=kubelet.DEFAULT_ROOT)
    parser.add_argument("--namespace", default=keys.NAMESPACE)
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between passes")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds for every wait")
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    return parser


def smi_reset(index: int, bus_id: str) -> None:
    """`nvidia-smi -r -i BUS`: reset one GPU; 'not supported' means only a reboot helps."""
    try:
        done = subprocess.run(  # noqa: S603 (fixed argv, no shell)
            ["nvidia-smi", "-r", "-i", bus_id],
            capture_output=True,
            text=True,
            timeout=_SMI_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise nvml.RebootRequiredError(f"GPU {index}: cannot reset it: {e}") from e
    if done.returncode != 0:
        message = (done.stdout + done.stderr).strip().splitlines()
        text = message[-1] if message else f"exit {done.returncode}"
        if "not supported" in text.lower():
            raise nvml.RebootRequiredError(f"GPU {index}: {text}")
        raise errors.DeviceError(f"GPU {index}: reset failed: {text}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the agent; returns the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if not args.node_name:
        log.error("no node name: pass --node-name or set NODE_NAME")
        return int(errors.ExitCode.USAGE)
    options = reconcile.Options(
        node=args.node_name,
        namespace=args.namespace,
        kubelet_socket=kubelet.socket_path(args.kubelet_root),
        timeout=args.timeout,
        reset=smi_reset,
    )
    api = cluster.connect()
    while True:
        try:
            reconcile.reconcile(api, options)
        except errors.GpuError as e:
            log.error("reconcile failed: %s", e.message)
            if args.once:
                return int(e.exit_code)
        if args.once:
            return 0
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
