"""Runtime and driver verdicts read from the end of a pod's container logs.

Owns which logs are worth reading (`wanted`: every container of a pod on a node that has
started or ended, and the run before the last restart of one that restarted) and the error
lines CUDA, NVML and the NVIDIA container toolkit write when a container got no usable GPU
(`check`), each with what it means and what to do. The workflow reads the tails the cluster
lets it (a bounded number of lines and bytes each) and hands them here as text. Pure:
standard library only; must not read the cluster.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

from kubectl_gpu.doctor.facts import Pod
from kubectl_gpu.doctor.model import Diagnosis, Layer

MAX_READS = 8  # containers × instances per pod: a bound on requests, not on what is found
_MAX_LINE = 300
_DRIVER_UPGRADED = (
    "the loaded kernel module and the user-space driver libraries differ, as after a driver "
    "upgrade without a reboot: reboot the node (or reload the nvidia modules); "
    "`nvidia-smi` on the node shows the same error"
)
_NOT_INJECTED = (
    "the NVIDIA container toolkit did not inject the driver: check that the pod requests "
    "nvidia.com/gpu (or a MIG resource), that its runtimeClassName or containerd's default "
    "runtime is nvidia, and the toolkit's logs on the node"
)


@dataclasses.dataclass(frozen=True)
class Pattern:
    """A fragment an error line contains (case-insensitive), the layer it names, what to do."""

    fragment: str
    layer: Layer
    message: str  # {node} is the pod's node
    fix: str


# Most specific first: a line is attributed to the first pattern it contains.
PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        "driver/library version mismatch",
        "driver",
        "the NVIDIA driver on node {node} does not match its libraries",
        _DRIVER_UPGRADED,
    ),
    Pattern(
        "cuda driver version is insufficient",
        "driver",
        "the image's CUDA needs a newer NVIDIA driver than node {node} has",
        "run an image built for the node's CUDA version (the top right of `nvidia-smi`), "
        "or upgrade the node's driver; CUDA forward compatibility covers data-center GPUs only",
    ),
    Pattern(
        "nvidia-container-cli: initialization error",
        "runtime",
        "the NVIDIA container runtime on node {node} could not set up the container's GPU",
        "the toolkit could not reach the driver: check `nvidia-smi` and "
        "`nvidia-container-cli info` on the node, then the toolkit's configuration",
    ),
    Pattern(
        "libnvidia-ml.so.1: cannot open shared object file",
        "runtime",
        "the container has no NVIDIA driver libraries: it was started without the GPU runtime",
        _NOT_INJECTED,
    ),
    Pattern(
        "failed to initialize nvml",
        "driver",
        "NVML cannot reach the NVIDIA driver from the container on node {node}",
        "check that the driver is loaded on the node (`nvidia-smi`, dmesg for Xid errors); "
        "if the node is fine, the container runtime did not inject the GPU",
    ),
    Pattern(
        "no cuda-capable device is detected",
        "runtime",
        "the container runs without a GPU: CUDA finds no device",
        _NOT_INJECTED,
    ),
    Pattern(
        "cuda_error_no_device",
        "runtime",
        "the container runs without a GPU: CUDA finds no device",
        _NOT_INJECTED,
    ),
)


@dataclasses.dataclass(frozen=True)
class LogRead:
    """One log worth reading: a container's current run, or (`previous`) the one before."""

    container: str
    previous: bool


@dataclasses.dataclass(frozen=True)
class ContainerLog:
    """The tail of one container's log, as read."""

    container: str
    previous: bool
    text: str


def wanted(pod: Pod) -> tuple[LogRead, ...]:
    """The logs to read for `pod`: none until it has a node, at most MAX_READS."""
    if not pod.node:
        return ()
    reads = [LogRead(s.name, False) for s in pod.states if s.started or s.terminated]
    reads += [LogRead(s.name, True) for s in pod.states if s.restarts > 0]
    return tuple(reads[:MAX_READS])


def check(pod: Pod, logs: Sequence[ContainerLog]) -> list[Diagnosis]:
    """One verdict per container and pattern, with the latest matching line as evidence."""
    found: list[Diagnosis] = []
    seen: set[tuple[str, str]] = set()
    for log in logs:
        for pattern, line in _latest_matches(log.text):
            if (log.container, pattern.message) in seen:
                continue
            seen.add((log.container, pattern.message))
            run = " (previous run)" if log.previous else ""
            found.append(
                Diagnosis(
                    pattern.layer,
                    "error",
                    pod.ref,
                    pattern.message.format(node=pod.node or "?"),
                    (f"container {log.container}{run} log: {line[:_MAX_LINE]}",),
                    pattern.fix,
                )
            )
    return found


def _latest_matches(text: str) -> Iterator[tuple[Pattern, str]]:
    """Each pattern found in `text`, with the last line that shows it."""
    latest: dict[Pattern, str] = {}
    for line in text.splitlines():
        lower = line.lower()
        pattern = next((p for p in PATTERNS if p.fragment in lower), None)
        if pattern is not None:
            latest[pattern] = line.strip()
    yield from ((p, latest[p]) for p in PATTERNS if p in latest)
