"""Who holds the GPU memory a container ran out of: the verdict on a CUDA out-of-memory.

Owns recognising CUDA's out-of-memory errors in a container's last termination message or
log tail (`evidence`), and, from what the pod's node reports of the physical GPU the pod
holds (`GpuShare`, which the workflow reads with `kubectl gpu top`'s reader), the verdict
(`check`): on a time-sliced GPU, the neighbours holding the memory, biggest first, and that
time-slicing has no memory isolation ("there is no memory or fault-isolation between
replicas", NVIDIA's GPU Operator docs), so the fix is MPS (a cap per pod) or MIG (memory of
its own); under MPS, MIG or a whole GPU, the pod's own cap. Pure: standard library only;
must not read the cluster, nor know where the figures come from.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from kubectl_gpu.doctor.containerlogs import ContainerLog
from kubectl_gpu.doctor.facts import Pod
from kubectl_gpu.doctor.model import Diagnosis

# What CUDA programs print when an allocation fails on the device (lower case; a line is
# matched when it contains one). Not the kernel's OOM killer, which is host memory
# (reason OOMKilled) and says nothing about the GPU.
FRAGMENTS = (
    "cuda out of memory",  # PyTorch: "torch.OutOfMemoryError: CUDA out of memory. Tried to …"
    "cuda error: out of memory",  # cudaGetErrorString(cudaErrorMemoryAllocation), as PyTorch
    "cuda_error_out_of_memory",  # the driver API's name (TensorFlow, JAX/XLA)
    "cudaerrormemoryallocation",  # the runtime API's name
)
TIME_SLICED, MPS, MIG, WHOLE = "none", "mps", "mig", "whole-gpu"  # usage.isolation's forms
MAX_SHOWN = 5  # neighbours named in the evidence; the rest are counted
_MAX_LINE = 300


@dataclasses.dataclass(frozen=True)
class Holder:
    """Something else using memory on the GPU: a pod (`namespace/name`) or a process in no
    pod (`<no pod> pid N`), with the bytes it holds now."""

    ref: str
    memory: int


@dataclasses.dataclass(frozen=True)
class GpuShare:
    """One physical GPU the pod holds (or, when it holds none now, one of its node's), as its
    node reports it now: totals, the pod's isolation there and its cap, the others on it."""

    index: int | None
    uuid: str
    total: int | None
    used: int | None
    isolation: str  # TIME_SLICED, MPS, MIG, WHOLE, or "" when unknown
    cap: int | None  # the memory MPS or MIG holds the pod to
    own: int  # what the pod's processes hold now
    others: tuple[Holder, ...]  # biggest first


@dataclasses.dataclass(frozen=True)
class OutOfMemory:
    """A container's CUDA out-of-memory, and what its node's GPUs hold now (`unread`: why
    there are no figures; `held`: whether the pod holds the GPUs in `shares`)."""

    evidence: str
    shares: tuple[GpuShare, ...] = ()
    unread: str = ""
    held: bool = True


def evidence(pod: Pod, logs: Sequence[ContainerLog]) -> str | None:
    """The latest CUDA out-of-memory line of the pod, with where it was seen: a container's
    termination message first (kubelet kept it), then its log tails."""
    for state in pod.states:
        for message, when in ((state.last_message, "last run"), (state.message, "this run")):
            line = _latest(message)
            if line:
                return f"container {state.name} ({when}) ended with: {line}"
    for log in logs:
        line = _latest(log.text)
        if line:
            run = " (previous run)" if log.previous else ""
            return f"container {log.container}{run} log: {line}"
    return None


def check(pod: Pod, oom: OutOfMemory | None) -> list[Diagnosis]:
    """One verdict on the out-of-memory, naming who holds the memory when the figures say."""
    if oom is None:
        return []
    if oom.unread:
        return [_unread(pod, oom)]
    shared = [s for s in oom.shares if s.isolation == TIME_SLICED and s.others]
    if shared:
        return [_neighbours(pod, oom, shared)]
    if oom.shares and oom.held:
        return [_own(pod, oom, oom.shares[0])]
    return [_unread(pod, dataclasses.replace(oom, unread=f"no GPU of node {pod.node} holds it"))]


def _neighbours(pod: Pod, oom: OutOfMemory, shares: Sequence[GpuShare]) -> Diagnosis:
    top = max(((h, s) for s in shares for h in s.others), key=lambda hs: hs[0].memory)
    holder, share = top
    where = "the time-sliced GPU it holds" if oom.held else f"node {pod.node}'s time-sliced GPU"
    message = (
        f"the pod ran out of GPU memory on {where}, which {holder.ref} shares with no memory "
        f"isolation: {holder.ref} holds {size(holder.memory)} of its {size(share.total)}"
    )
    found = [oom.evidence]
    for s in shares:
        found.append(_gpu_line(s, pod))
        found += [f"{h.ref} holds {size(h.memory)} on GPU {_index(s)}" for h in
                  s.others[:MAX_SHOWN]]  # fmt: skip
        if len(s.others) > MAX_SHOWN:
            found.append(f"and {len(s.others) - MAX_SHOWN} more on GPU {_index(s)}")
    fix = (
        "time-slicing has no memory isolation: every pod on the GPU can take all of its memory. "
        "Give the pod memory of its own: MPS caps each pod at the GPU's memory / replicas "
        "(kubectl gpu share --mps), a MIG instance is memory no other pod can touch "
        f"(kubectl gpu mig apply), or a whole GPU; or move {holder.ref} off this GPU. "
        f"kubectl gpu top node/{pod.node} shows who holds what"
    )
    return Diagnosis("runtime", "error", pod.ref, message, tuple(found), fix)


def _own(pod: Pod, oom: OutOfMemory, share: GpuShare) -> Diagnosis:
    cap = {
        MPS: f"its MPS cap of {size(share.cap)}",
        MIG: f"its MIG instance's {size(share.cap)}",
        WHOLE: f"its whole GPU's {size(share.total)}",
    }.get(share.isolation, f"the {size(share.total)} of its GPU")
    message = f"the pod ran out of GPU memory within {cap}: no other pod took it"
    fix = (
        "the program needs more GPU memory than it has: lower its batch size or model size, "
        "or give the pod a larger share (fewer MPS replicas, a larger MIG profile, a whole GPU)"
    )
    found = (oom.evidence, _gpu_line(share, pod))
    return Diagnosis("runtime", "error", pod.ref, message, found, fix)


def _unread(pod: Pod, oom: OutOfMemory) -> Diagnosis:
    return Diagnosis(
        "runtime",
        "error",
        pod.ref,
        "the pod ran out of GPU memory",
        (oom.evidence, f"what its GPU holds was not read: {oom.unread}"),
        "if the GPU is time-sliced, a neighbour may hold the memory (time-slicing has no memory "
        "isolation): kubectl gpu top node/NODE shows who holds what once the kubectl-gpu agent "
        "runs there (kubectl gpu install); else lower the program's batch or model size",
    )


def _gpu_line(share: GpuShare, pod: Pod) -> str:
    used = f"{size(share.used)} of {size(share.total)} in use"
    return (
        f"node {pod.node} GPU {_index(share)} ({share.uuid}): {used} now, "
        f"{size(share.own)} of it by this pod"
    )


def _index(share: GpuShare) -> str:
    return "?" if share.index is None else str(share.index)


def _latest(text: str) -> str:
    found = ""
    for line in text.splitlines():
        lower = line.lower()
        if any(f in lower for f in FRAGMENTS):
            found = line.strip()[:_MAX_LINE]
    return found


def size(value: int | None) -> str:
    """Bytes as `kubectl gpu top` prints memory: `512Mi`, `12.3Gi`; `?` when unknown."""
    if value is None:
        return "?"
    mib = value / 2**20
    return f"{mib:.0f}Mi" if mib < 1024 else f"{mib / 1024:.1f}Gi"
