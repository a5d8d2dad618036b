"""The node agent (`kubectl-gpu-agent`, a DaemonSet): reconciles its own node's MIG layout.

Owns the entry point and its options: `--node-name` (default $NODE_NAME, from the downward
API), `--kubelet-root`, `--namespace`, `--interval`, `--resync`, `--timeout`, `--once`,
`--heartbeat` (touched after every pass and every interval), `--check-health --max-age S` (the
pod's probes), `--usage-port` (the read-only endpoint `kubectl gpu top` reads through the pod
proxy, agent/usageserver.py; 0 turns it off), `--proc-root` (where the host's processes are
read), `--usage-sample-interval`/`--usage-samples` (the ring behind `top --idle`), `--version`
and `--debug`; they become one `passes.Settings`, and `passes.run` runs the agent (agent/
passes.py: when a pass runs and what it does). Outside the loop, an unexpected exception exits
70 (ExitCode.INTERNAL) with one line. Must not run passes itself, hold rules (mig.plan and
mig.apply decide) nor import pynvml/kubernetes itself (the adapters do).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from kubectl_gpu import __version__, errors, keys, kubelet
from kubectl_gpu.agent import passes, usagereading, usageserver, watches
from kubectl_gpu.agent.gpureset import smi_reset
from kubectl_gpu.agent.lifecycle import beat, check_health
from kubectl_gpu.agent.passes import user_agent

__all__ = ["beat", "check_health", "main", "smi_reset", "user_agent"]

log = logging.getLogger("kubectl_gpu.agent")
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
    parser.add_argument(
        "--interval",
        type=float,
        default=10.0,
        help="seconds between looks at the node's own GPUs and kubelet (no API request unless "
        "they changed), and the first retry delay after a failed pass",
    )
    parser.add_argument(
        "--resync",
        type=float,
        default=watches.RESYNC,
        help="seconds between passes when no watched change arrives (a safety net)",
    )
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
    parser.add_argument(
        "--usage-port",
        type=int,
        default=usageserver.DEFAULT_PORT,
        help="port of the read-only endpoint kubectl gpu top reads through the API server's "
        "pod proxy (0: off)",
    )
    parser.add_argument(
        "--proc-root",
        type=Path,
        default=usagereading.DEFAULT_PROC_ROOT,
        help="where the host's processes are read (NVML's PIDs are the host's): /proc with "
        "hostPID, or a host /proc mounted elsewhere",
    )
    parser.add_argument(
        "--usage-sample-interval",
        type=float,
        default=60.0,
        help="seconds between the samples kept for kubectl gpu top --idle (0: none kept)",
    )
    parser.add_argument(
        "--usage-samples",
        type=int,
        default=60,
        help="samples kept per held device for kubectl gpu top --idle",
    )
    parser.add_argument("--version", action="version", version=f"kubectl-gpu-agent {__version__}")
    parser.add_argument("--debug", action="store_true", help="log tracebacks of internal errors")
    return parser


def settings_of(args: argparse.Namespace) -> passes.Settings:
    """The options as the agent runs with them (`--check-health` and `--max-age` aside)."""
    return passes.Settings(
        node=args.node_name,
        kubeconfig=args.kubeconfig,
        kubelet_root=args.kubelet_root,
        namespace=args.namespace,
        interval=args.interval,
        resync=args.resync,
        timeout=args.timeout,
        once=args.once,
        heartbeat=args.heartbeat,
        usage_port=args.usage_port,
        proc_root=args.proc_root,
        usage_sample_interval=args.usage_sample_interval,
        usage_samples=args.usage_samples,
        debug=args.debug,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the agent; returns the exit status (ExitCode.INTERNAL, 70, for a bug)."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    # The checkpoint reader's notes (e.g. the unverified checksum) are for people reading a
    # copy once; the agent reads the file every pass and keeps only its warnings. Put back on
    # return, so that a caller in the same process (a test) keeps its own logging.
    quiet = logging.getLogger("kubectl_gpu.kubelet")
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    try:
        return _run(args)
    except Exception as e:  # noqa: BLE001 - the boundary: one line, a distinct exit status
        passes.internal_error("kubectl-gpu-agent", e, args.debug)
        return int(errors.ExitCode.INTERNAL)
    finally:
        quiet.setLevel(level)


def _run(args: argparse.Namespace) -> int:
    if args.check_health:
        return check_health(args.heartbeat, args.max_age)
    if not args.node_name:
        log.error("no node name: pass --node-name or set NODE_NAME")
        return int(errors.ExitCode.USAGE)
    return passes.run(settings_of(args))


if __name__ == "__main__":
    sys.exit(main())
