"""The shared core of the NVML stand-in's C symbols (test code only).

Owns: the state every symbol sees (the GPUs, the handle table, the init count, the caller's
privilege, a call log, one lock), marking methods as C symbols, and resolving handle arguments to
what they name. Must not: implement symbols (symbols.py, gpu_instances.py, compute_instances.py)
or touch pynvml's module globals (__init__.py installs).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from tests.kit.node.libnvml import codes
from tests.kit.node.libnvml.device import Gpu
from tests.kit.node.libnvml.instances import ComputeInstance, GpuInstance
from tests.kit.node.libnvml.marshal import HandleTable, HandleTarget

F = TypeVar("F", bound=Callable[..., Any])

SYMBOL_MARK = "_nvml_symbol"


def status(ok: bool) -> int:
    """SUCCESS, or INVALID_ARGUMENT when an out-parameter could not be written (NULL)."""
    return codes.SUCCESS if ok else codes.INVALID_ARGUMENT


def c_symbol(fn: F) -> F:
    """Mark a method as an NVML C symbol that answers UNINITIALIZED before nvmlInit."""
    setattr(fn, SYMBOL_MARK, "after-init")
    return fn


def c_symbol_any_time(fn: F) -> F:
    """Mark a method as an NVML C symbol callable before nvmlInit (init, error strings)."""
    setattr(fn, SYMBOL_MARK, "any-time")
    return fn


class SymbolCore:
    """State and handle resolution shared by the symbol mixins."""

    def __init__(self, gpus: Sequence[Gpu]) -> None:
        self.gpus: list[Gpu] = list(gpus)
        self.handles = HandleTable()
        self.init_count = 0
        self.privileged = True  # False simulates a non-root caller (NO_PERMISSION on changes)
        self.calls: list[str] = []  # every symbol pynvml called, in order
        # Set by `lose_driver`: every symbol but nvmlErrorString/nvmlShutdown answers this code.
        self.lost: int | None = None
        # Set by `on_return`: run after a symbol returns (e.g. a signal arriving during the call).
        self.after_return: dict[str, Any] = {}
        self.lock = threading.RLock()
        indexes = [gpu.index for gpu in self.gpus]
        if indexes != list(range(len(indexes))):
            raise ValueError(f"GPU indexes must be 0..n-1 in order, got {indexes}")

    # -- handle targets ------------------------------------------------------------------------

    def gpu_target(self, gpu: Gpu) -> HandleTarget:
        """The handle target of a whole GPU."""
        return HandleTarget("gpu", gpu)

    def gi_target(self, gpu: Gpu, gi: GpuInstance) -> HandleTarget:
        """The handle target of a GPU instance."""
        return HandleTarget("gi", gpu, gi)

    def ci_target(self, gpu: Gpu, gi: GpuInstance, ci: ComputeInstance) -> HandleTarget:
        """The handle target of a compute instance."""
        return HandleTarget("ci", gpu, gi, ci)

    def mig_target(self, gpu: Gpu, gi: GpuInstance, ci: ComputeInstance) -> HandleTarget:
        """The handle target of a MIG device (an nvmlDevice_t naming one compute instance)."""
        return HandleTarget("mig", gpu, gi, ci)

    # -- resolving handle arguments ------------------------------------------------------------

    def resolve(self, handle: Any, *kinds: str) -> HandleTarget | None:
        """What ``handle`` names if it is a live handle of one of ``kinds``."""
        found = self.handles.resolve(handle)
        if found is None or found.kind not in kinds:
            return None
        return found

    def whole_gpu(self, handle: Any) -> Gpu | None:
        """The GPU a whole-GPU device handle names."""
        found = self.resolve(handle, "gpu")
        return found.gpu if found is not None else None

    def mig_capable_gpu(self, handle: Any) -> tuple[int, Gpu | None]:
        """A whole-GPU handle of a MIG-capable GPU, MIG mode on or off; else INVALID_ARGUMENT or
        NOT_SUPPORTED."""
        gpu = self.whole_gpu(handle)
        if gpu is None:
            return codes.INVALID_ARGUMENT, None
        if not gpu.mig_capable:
            return codes.NOT_SUPPORTED, None
        return codes.SUCCESS, gpu

    def mig_gpu(self, handle: Any) -> tuple[int, Gpu | None]:
        """A whole-GPU handle whose MIG mode is on; else INVALID_ARGUMENT or NOT_SUPPORTED."""
        result, gpu = self.mig_capable_gpu(handle)
        if gpu is not None and not gpu.mig_enabled:
            return codes.NOT_SUPPORTED, None
        return result, gpu
