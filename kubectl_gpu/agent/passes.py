"""The agent's run: a pass whenever one is due, and between passes a look at the node's own facts.

Owns `Settings` (the agent's options, typed and checked once by the entry point), `run` (the
API client, SIGTERM handling, the usage endpoint and the loop, until SIGTERM), the loop itself
and `Pass` (how a pass ended). A pass calls `reconcile.reconcile` and then `reporting.publish`;
it runs at start, when a watch (agent/watches.py) sees the Node's labels or annotations or our
MIG ConfigMap change, when NVML shows the GPUs changed, at the resync, and after a failed pass
with a jittered back-off; between passes the agent reads only local facts (no API request
unless the report changed). The loop never stops on an error, not even a bug: an unexpected
exception ends that pass (the reconcile pass reports it on the Node as `failed`) and is logged
as one line (`internal_error`). NVML that has lost the driver marks the agent unhealthy;
SIGTERM (agent/lifecycle.py) ends it at a safe point, noting on the Node where a MIG change
stopped so that the next agent resumes it. Must not parse the command line (the entry point,
agent/__init__.py, does), hold rules (mig.plan and mig.apply decide) or import
pynvml/kubernetes itself (the adapters do).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Iterator
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
from kubectl_gpu.agent.gpureset import smi_reset
from kubectl_gpu.agent.lifecycle import Shutdown, Stopped, beat
from kubectl_gpu.mig.apply import State

log = logging.getLogger("kubectl_gpu.agent")
_MIN_LOOK = 0.05  # seconds: --interval 0 must not spin


@dataclasses.dataclass(frozen=True)
class Settings:
    """What the agent was started with (its options, agent/__init__.py)."""

    node: str
    kubeconfig: str | None
    kubelet_root: Path
    namespace: str
    interval: float  # seconds between looks at the node's own facts; the first retry delay
    resync: float  # seconds between passes when no watched change arrives
    timeout: float  # seconds for every wait
    once: bool  # one pass, then exit
    heartbeat: Path  # touched after every pass and every interval
    usage_port: int  # the endpoint kubectl gpu top reads (0: off)
    proc_root: Path  # where the host's processes are read
    usage_sample_interval: float  # seconds between the samples behind top --idle (0: none)
    usage_samples: int  # samples kept per held device
    debug: bool  # log tracebacks of internal errors


def user_agent(node: str) -> str:
    """How the agent of `node` names itself to the API server (its audit log, a test's count)."""
    return f"kubectl-gpu-agent/{__version__} (node {node})"


def run(settings: Settings) -> int:
    """Run the agent until SIGTERM (or one pass, `once`); the exit status."""
    api = cluster.connect(settings.kubeconfig, user_agent=user_agent(settings.node))
    with Shutdown().installed() as shutdown:
        options = reconcile.Options(
            node=settings.node,
            namespace=settings.namespace,
            kubelet_socket=kubelet.socket_path(settings.kubelet_root),
            timeout=settings.timeout,
            reset=lambda index, bus: _reset(shutdown, index, bus),
        )
        sources = reporting.Sources(settings.node, settings.kubelet_root)
        with usage_endpoint(settings, sources):
            try:
                return _loop(api, options, sources, settings)
            except Stopped:
                _record_stop(api, settings.node)
                return 0


def internal_error(where: str, e: BaseException, debug: bool) -> None:
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


@contextlib.contextmanager
def usage_endpoint(settings: Settings, sources: reporting.Sources) -> Iterator[None]:
    """The endpoint `kubectl gpu top` reads, and the sampler behind `--idle`, for as long as
    the loop runs; none with `--once` or `--usage-port 0`."""
    if settings.once or not settings.usage_port:
        yield
        return
    reader = usagereading.UsageReader(usagereading.UsageSources(sources, settings.proc_root))
    sampler = None
    interval, samples = settings.usage_sample_interval, settings.usage_samples
    if interval > 0 and samples > 0:
        sampler = usagereading.Sampler(reader, interval, samples)
    try:
        server = usageserver.UsageServer(("", settings.usage_port), reader, sampler)
    except OSError as e:
        log.error("the usage endpoint cannot listen on port %d: %s", settings.usage_port, e)
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
    settings: Settings,
) -> int:
    """Run a pass when one is due, and between passes look at the node's own facts every
    interval: at rest that costs the API server nothing (the watches are open streams)."""
    if settings.once:
        return _pass(api, options, sources, settings, None).status
    wakeups = watches.Wakeups(
        api, settings.node, settings.namespace, resync=settings.resync, retry=settings.interval
    )
    backoff = watches.Backoff(settings.interval)
    try:
        wakeups.start()
        done: Pass | None = None
        while True:
            wakeups.passed()
            done = _pass(api, options, sources, settings, done.published if done else None)
            if done.status:  # an API error, a bug: again after a jittered, growing delay
                done.retry_at = time.monotonic() + backoff.next()
            else:
                backoff.reset()
            _rest(api, sources, settings, wakeups, done)
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
    settings: Settings,
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
        internal_error("the reconcile pass", e, settings.debug)
        status = int(errors.ExitCode.INTERNAL)
    report_status, published = _publish(api, sources, settings, published)
    if lost:
        lifecycle.mark_unhealthy(settings.heartbeat, f"NVML: {lost}")
    else:
        beat(settings.heartbeat)
    return Pass(status or report_status, published, bool(lost))


def _publish(
    api: cluster.Api,
    sources: reporting.Sources,
    settings: Settings,
    published: reporting.Published | None,
) -> tuple[int, reporting.Published | None]:
    """Publish the report if it changed; the status and what is now stored."""
    try:
        return 0, reporting.publish(api, sources, published.digest if published else None)
    except errors.GpuError as e:
        log.error("publishing the GPU report failed: %s", errors.printable(e.message))
        return int(e.exit_code), published
    except Exception as e:  # noqa: BLE001 - as in a pass
        internal_error("publishing the GPU report", e, settings.debug)
        return int(errors.ExitCode.INTERNAL), published


def _rest(
    api: cluster.Api,
    sources: reporting.Sources,
    settings: Settings,
    wakeups: watches.Wakeups,
    done: Pass,
) -> None:
    """Until a pass is due (a watched change, the resync, the retry after a failed pass, or
    GPUs that NVML shows changed), beat every interval, and publish the report when the
    node's own facts changed; a failing agent publishes nothing until its retry."""
    every = max(settings.interval, _MIN_LOOK)
    while True:
        if wakeups.wait(min(every, max(0.0, done.retry_at - time.monotonic()))):
            return
        if time.monotonic() >= done.retry_at:
            return
        if not done.lost:
            beat(settings.heartbeat)  # alive, whatever the API server answers
        if done.status:
            continue
        before = done.published
        status, done.published = _publish(api, sources, settings, before)
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
