"""The node agent (`kubectl-gpu-agent`, a DaemonSet): reconciles its own node's MIG layout.

Owns the entry point and its options: `--node-name` (default $NODE_NAME, from the downward
API), `--kubelet-root`, `--namespace`, `--interval`, `--resync`, `--timeout`, `--once`,
`--heartbeat` (touched after every pass and every interval), `--check-health --max-age S` (the
pod's probes), `--usage-port` (the read-only endpoint `kubectl gpu top` reads through the pod
proxy, agent/usageserver.py; 0 turns it off), `--proc-root` (where the host's processes are
read), `--usage-sample-interval`/`--usage-samples` (the ring behind `top --idle`), `--version`
and `--debug`. A pass calls `reconcile.reconcile` and then
`reporting.publish`; it runs at start, when a watch (agent/watches.py) sees the Node's labels or
annotations or our MIG ConfigMap change, when NVML shows the GPUs changed, at the resync, and
after a failed pass with a jittered back-off; between passes the agent reads only local facts
(no API request unless the report changed). The loop never stops on an error, not even a
bug: an unexpected exception ends that pass (the reconcile pass reports it on the Node as
`failed`) and is logged as one line; outside the loop it exits 70 (ExitCode.INTERNAL). NVML
that has lost the driver marks the agent unhealthy; SIGTERM (agent/lifecycle.py) ends it at a
safe point, noting on the Node where a MIG change stopped so that the next agent resumes it.
Must not hold rules (mig.plan and mig.apply decide) nor import pynvml/kubernetes itself (the
adapters do).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from kubectl_gpu import __version__, cluster, errors, keys, kubelet, nvml
from kubectl_gpu.agent import (
    lifecycle,
    nodestate,
    reconcile,
    reporting,
    usagereading,
    usageserver,
    watches,
)
from kubectl_gpu.agent.lifecycle import Shutdown, Stopped, beat, check_health
from kubectl_gpu.mig.apply import State

__all__ = ["beat", "check_health", "main", "smi_reset", "user_agent"]

log = logging.getLogger("kubectl_gpu.agent")
_SMI_TIMEOUT = 120.0
HEARTBEAT = Path("/run/kubectl-gpu/heartbeat")
_MIN_LOOK = 0.05  # seconds: --interval 0 must not spin


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


def user_agent(node: str) -> str:
    """How the agent of `node` names itself to the API server (its audit log, a test's count)."""
    return f"kubectl-gpu-agent/{__version__} (node {node})"


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
        _internal_error("kubectl-gpu-agent", e, args.debug)
        return int(errors.ExitCode.INTERNAL)
    finally:
        quiet.setLevel(level)


def _internal_error(where: str, e: BaseException, debug: bool) -> None:
    log.error(
        "internal error in %s (node %s): %s: %s; this is a bug in kubectl-gpu %s: please "
        "report it with this line at %s%s",
        where,
        errors.printable(os.environ.get("NODE_NAME", "?")),
        type(e).__name__,
        errors.printable(errors.without_secrets(str(e))),  # never its service-account token
        __version__,
        errors.REPORT_BUGS,
        "" if debug else " (--debug logs the traceback)",
        exc_info=e if debug else None,
    )


def _run(args: argparse.Namespace) -> int:
    if args.check_health:
        return check_health(args.heartbeat, args.max_age)
    if not args.node_name:
        log.error("no node name: pass --node-name or set NODE_NAME")
        return int(errors.ExitCode.USAGE)
    api = cluster.connect(args.kubeconfig, user_agent=user_agent(args.node_name))
    with Shutdown().installed() as shutdown:
        options = reconcile.Options(
            node=args.node_name,
            namespace=args.namespace,
            kubelet_socket=kubelet.socket_path(args.kubelet_root),
            timeout=args.timeout,
            reset=lambda index, bus: _reset(shutdown, index, bus),
        )
        sources = reporting.Sources(args.node_name, args.kubelet_root)
        with _usage_endpoint(args, sources):
            try:
                return _loop(api, options, sources, args)
            except Stopped:
                _record_stop(api, args.node_name)
                return 0


@contextlib.contextmanager
def _usage_endpoint(args: argparse.Namespace, sources: reporting.Sources) -> Iterator[None]:
    """The endpoint `kubectl gpu top` reads, and the sampler behind `--idle`, for as long as
    the loop runs; none with `--once` or `--usage-port 0`."""
    if args.once or not args.usage_port:
        yield
        return
    reader = usagereading.UsageReader(usagereading.UsageSources(sources, args.proc_root))
    sampler = None
    if args.usage_sample_interval > 0 and args.usage_samples > 0:
        sampler = usagereading.Sampler(reader, args.usage_sample_interval, args.usage_samples)
    try:
        server = usageserver.UsageServer(("", args.usage_port), reader, sampler)
    except OSError as e:
        log.error("the usage endpoint cannot listen on port %d: %s", args.usage_port, e)
        yield
        return
    server.serve_in_background()
    if sampler is not None:
        sampler.start()
    log.info("usage endpoint on port %d (kubectl gpu top)", server.server_address[1])
    try:
        yield
    finally:
        if sampler is not None:
            sampler.stop()
        server.shutdown()
        server.server_close()


def _reset(shutdown: Shutdown, index: int, bus: str) -> None:
    with shutdown.critical():  # a reset cut short could leave the GPU unusable until reboot
        smi_reset(index, bus)


def _loop(
    api: cluster.Api,
    options: reconcile.Options,
    sources: reporting.Sources,
    args: argparse.Namespace,
) -> int:
    """Run a pass when one is due, and between passes look at the node's own facts every
    interval: at rest that costs the API server nothing (the watches are open streams)."""
    if args.once:
        return _pass(api, options, sources, args, None).status
    wakeups = watches.Wakeups(
        api, args.node_name, args.namespace, resync=args.resync, retry=args.interval
    )
    backoff = watches.Backoff(args.interval)
    try:
        wakeups.start()
        done: Pass | None = None
        while True:
            wakeups.passed()
            done = _pass(api, options, sources, args, done.published if done else None)
            if done.status:  # an API error, a bug: again after a jittered, growing delay
                done.retry_at = time.monotonic() + backoff.next()
            else:
                backoff.reset()
            _rest(api, sources, args, wakeups, done)
    finally:
        wakeups.stop()


@dataclasses.dataclass
class Pass:
    """How a pass ended: its exit status, the report stored, whether NVML lost the driver."""

    status: int
    published: reporting.Published | None
    lost: bool = False
    retry_at: float = float("inf")  # time.monotonic() of the retry after a failed pass


def _pass(
    api: cluster.Api,
    options: reconcile.Options,
    sources: reporting.Sources,
    args: argparse.Namespace,
    published: reporting.Published | None,
) -> Pass:
    """Reconcile MIG, then publish the node's GPU report; a failure of one never skips the
    other, and every pass ends with a heartbeat (the loop is alive even when it reports),
    unless NVML has lost the driver: then the probes fail until the container is replaced."""
    status, lost = 0, ""
    try:
        reconcile.reconcile(api, options)
    except nvml.NvmlUnavailableError as e:
        log.error("NVML has lost the driver: %s", e.message)
        status, lost = int(e.exit_code), e.message
    except errors.GpuError as e:
        log.error("reconcile failed: %s", errors.printable(e.message))
        status = int(e.exit_code)
    except Exception as e:  # noqa: BLE001 - a bug ends this pass, never the agent
        _internal_error("the reconcile pass", e, args.debug)
        status = int(errors.ExitCode.INTERNAL)
    report_status, published = _publish(api, sources, args, published)
    if lost:
        lifecycle.mark_unhealthy(args.heartbeat, f"NVML: {lost}")
    else:
        beat(args.heartbeat)
    return Pass(status or report_status, published, bool(lost))


def _publish(
    api: cluster.Api,
    sources: reporting.Sources,
    args: argparse.Namespace,
    published: reporting.Published | None,
) -> tuple[int, reporting.Published | None]:
    """Publish the report if it changed; the status and what is now stored."""
    try:
        return 0, reporting.publish(api, sources, published.digest if published else None)
    except errors.GpuError as e:
        log.error("publishing the GPU report failed: %s", errors.printable(e.message))
        return int(e.exit_code), published
    except Exception as e:  # noqa: BLE001 - as in a pass
        _internal_error("publishing the GPU report", e, args.debug)
        return int(errors.ExitCode.INTERNAL), published


def _rest(
    api: cluster.Api,
    sources: reporting.Sources,
    args: argparse.Namespace,
    wakeups: watches.Wakeups,
    done: Pass,
) -> None:
    """Until a pass is due (a watched change, the resync, the retry after a failed pass, or
    GPUs that NVML shows changed), beat every interval, and publish the report when the
    node's own facts changed; a failing agent publishes nothing until its retry."""
    every = max(args.interval, _MIN_LOOK)
    while True:
        if wakeups.wait(min(every, max(0.0, done.retry_at - time.monotonic()))):
            return
        if time.monotonic() >= done.retry_at:
            return
        if not done.lost:
            beat(args.heartbeat)  # alive, whatever the API server answers
        if done.status:
            continue
        before = done.published
        status, done.published = _publish(api, sources, args, before)
        if status:  # a pass follows at once, and backs off if it fails too
            return
        if before is not None and done.published is not None:
            if done.published.gpus != before.gpus:
                log.info("the GPUs changed outside a pass: reconciling")
                return


def _record_stop(api: cluster.Api, node: str) -> None:
    """Say on the Node where a MIG change stopped; the next agent resumes from that phase."""
    try:
        state = nodestate.NodeState.read(api, node)
        record = state.record()
        if record.state is State.PENDING:
            phase = record.phase.value if record.phase else "its start"
            reason = f"the agent was stopped (SIGTERM) during {phase}; the next agent resumes it"
            state.write({}, {keys.MIG_REASON_ANNOTATION: reason})
            log.warning("%s", reason)
    except errors.GpuError as e:
        log.error("could not record where the agent stopped: %s", e.message)


if __name__ == "__main__":
    sys.exit(main())
