"""The node agent (`kubectl-gpu-agent`, a DaemonSet): reconciles its own node's MIG layout.

Owns the entry point and its options: `--node-name` (default $NODE_NAME, from the downward
API), `--kubelet-root`, `--namespace`, `--interval`, `--timeout`, `--once`, `--heartbeat`
(touched after every pass) and `--check-health --max-age S` (the pod's probes); the loop calls
`reconcile.reconcile` and then `reporting.publish` every interval and never stops on an error
it can report. Must not hold
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
from kubectl_gpu.agent import reconcile, reporting

log = logging.getLogger("kubectl_gpu.agent")
_SMI_TIMEOUT = 120.0
HEARTBEAT = Path("/run/kubectl-gpu/heartbeat")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubectl-gpu-agent", description=__doc__.split("\n")[0])
    parser.add_argument("--node-name", default=os.environ.get("NODE_NAME", ""))
    parser.add_argument(
        "--kubeconfig",
        help="kubeconfig to use outside a pod (default: $KUBECONFIG, else in-cluster)",
    )
    parser.add_argument("--kubelet-root", type=Path, default=kubelet.DEFAULT_ROOT)
    parser.add_argument("--namespace", default=keys.NAMESPACE)
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between passes")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds for every wait")
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    parser.add_argument(
        "--heartbeat", type=Path, default=HEARTBEAT, help="file touched after every pass"
    )
    parser.add_argument(
        "--check-health",
        action="store_true",
        help="exit 0 if a pass finished within --max-age seconds, else 1 (liveness/readiness)",
    )
    parser.add_argument("--max-age", type=float, default=120.0, help="seconds, for --check-health")
    return parser


def beat(heartbeat: Path) -> None:
    """Record that a pass finished: the probes read the file's age, not its content."""
    try:
        heartbeat.parent.mkdir(parents=True, exist_ok=True)
        heartbeat.touch()
    except OSError as e:  # the probe will then report the agent unhealthy, which is true enough
        log.warning("cannot touch the heartbeat file %s: %s", heartbeat, e)


def check_health(heartbeat: Path, max_age: float) -> int:
    """0 when the last pass finished at most `max_age` seconds ago, else 1 (with the reason)."""
    try:
        age = time.time() - heartbeat.stat().st_mtime
    except OSError:
        log.error("unhealthy: no pass has finished yet (%s does not exist)", heartbeat)
        return 1
    if age > max_age:
        log.error("unhealthy: the last pass finished %.0fs ago (limit %gs)", age, max_age)
        return 1
    return 0


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
    # The checkpoint reader's notes (e.g. the unverified checksum) are for people reading a
    # copy once; the agent reads the file every pass and keeps only its warnings.
    logging.getLogger("kubectl_gpu.kubelet").setLevel(logging.WARNING)
    if args.check_health:
        return check_health(args.heartbeat, args.max_age)
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
    sources = reporting.Sources(args.node_name, args.kubelet_root)
    return _loop(cluster.connect(args.kubeconfig), options, sources, args)


def _loop(
    api: cluster.Api,
    options: reconcile.Options,
    sources: reporting.Sources,
    args: argparse.Namespace,
) -> int:
    """Reconcile MIG, then publish the node's GPU report; a failure of one never skips the
    other, and every pass ends with a heartbeat (the loop is alive even when it reports)."""
    digest: str | None = None
    while True:
        status = 0
        try:
            reconcile.reconcile(api, options)
        except errors.GpuError as e:
            log.error("reconcile failed: %s", e.message)
            status = int(e.exit_code)
        try:
            digest = reporting.publish(api, sources, digest)
        except errors.GpuError as e:
            log.error("publishing the GPU report failed: %s", e.message)
            status = status or int(e.exit_code)
        beat(args.heartbeat)
        if args.once:
            return status
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
