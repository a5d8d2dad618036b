"""What holds a pod to its share of a GPU, for each sharing form (docs/top.md).

- a whole GPU (no replica, no MIG): the GPU's memory is the pod's;
- a MIG instance: the instance's own memory and SMs, enforced by the hardware;
- MPS through NVIDIA's device plugin: each client is pinned to memory/replicas and
  100/replicas % of the threads (`set_default_device_pinned_mem_limit`,
  `set_default_active_thread_percentage`, fixed fractions in its MPS control daemon);
- time-slicing: nothing. NVIDIA's docs: "there is no memory or fault-isolation between
  replicas", so every neighbour on the GPU can take the memory the pod needs.
Owns that decision as a `Limit`. Pure: standard library only.
"""

from __future__ import annotations

import dataclasses

WHOLE, MIG, MPS, NONE, UNKNOWN = "whole-gpu", "mig", "mps", "none", "unknown"
TIME_SLICING, MPS_STRATEGY = "time-slicing", "mps"


@dataclasses.dataclass(frozen=True)
class Limit:
    """The isolation a pod has on its device: the form, the memory it may use before
    another pod's memory is at stake (None: no cap), the SM share, and who else is there."""

    form: str
    memory: int | None = None
    thread_percent: int | None = None
    neighbours: tuple[str, ...] = ()

    def text(self) -> str:
        """The LIMIT cell: `whole GPU 80.0Gi`, `MIG 9.8Gi`, `MPS 20.0Gi 25%`, `none (…)`."""
        if self.form == WHOLE:
            return f"whole GPU {size(self.memory)}"
        if self.form == MIG:
            return f"MIG {size(self.memory)}"
        if self.form == MPS:
            return f"MPS {size(self.memory)} {self.thread_percent}% SM"
        if self.form == NONE:
            count = len(self.neighbours)
            return f"none: time-sliced, {count} neighbour{'s' if count != 1 else ''}"
        return "unknown"


def of(
    *,
    mig_memory: int | None,
    replicas: int | None,
    strategy: str | None,
    gpu_memory: int | None,
    neighbours: tuple[str, ...],
) -> Limit:
    """The limit for a pod on one device: `mig_memory` when it holds a MIG instance,
    `replicas` when its device ID is one of several replicas of a physical device
    (`strategy` from the node's `nvidia.com/gpu.sharing-strategy` label)."""
    if mig_memory is not None:
        return Limit(MIG, mig_memory, None, neighbours)
    if replicas is not None and replicas > 1:
        if strategy == MPS_STRATEGY:
            memory = gpu_memory // replicas if gpu_memory is not None else None
            return Limit(MPS, memory, 100 // replicas, neighbours)
        return Limit(NONE, None, None, neighbours)
    if neighbours:  # a whole GPU, and yet another pod's processes run on it
        return Limit(NONE, None, None, neighbours)
    return Limit(WHOLE, gpu_memory, None, ())


def size(value: int | None) -> str:
    """Bytes as kubectl top prints memory: `512Mi`, `12.3Gi`; `?` when unknown."""
    if value is None:
        return "?"
    mib = value / 2**20
    if mib < 1024:
        return f"{mib:.0f}Mi"
    return f"{mib / 1024:.1f}Gi"


def statement(strategy: str, replicas: int) -> str:
    """What a sharing config leaves each pod, in words (`share --dry-run`)."""
    if replicas <= 1 or strategy not in (TIME_SLICING, MPS_STRATEGY):
        return "each pod gets a whole GPU"
    if strategy == MPS_STRATEGY:
        return (
            f"MPS: each pod is capped at 1/{replicas} of its GPU's memory and "
            f"{100 // replicas}% of its SM threads"
        )
    return (
        f"time-slicing: no isolation; up to {replicas} pods share each GPU's memory, and any "
        "of them can take all of it (kubectl gpu top shows who holds what)"
    )
