"""NVML: read a node's GPUs and MIG state, and carry out MIG plan steps.

The only package that imports `pynvml`. `session()` initialises NVML and shuts it down; a
`Session` is what the agent holds while it is initialised. Its parts, one noun each:
`state` reads the live `MigState` and the physical inventory (`gpumap.allocations.Gpu`);
`processes` lists a GPU's compute processes and reads what each uses (`usage`: memory per
process, SM % per process where NVML samples it, the GPU's and each MIG device's own totals:
the plain readings of `usage.readings`); `steps` checks planned GPU instances against the
profiles and placements NVML itself reports and executes `plan` steps; `devices` holds the
small reads they share; `codes` turns every `NVMLError` into a `DeviceError` naming the GPU
and NVML's symbol, raised `from` it. Must not decide anything: which steps to run and in what
order is `mig.plan`'s.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pynvml

from kubectl_gpu.gpumap.allocations import MigDevice
from kubectl_gpu.gpumap.report import InventoryGpu
from kubectl_gpu.mig import plan
from kubectl_gpu.mig.state import MigState
from kubectl_gpu.nvml import processes, state, steps
from kubectl_gpu.nvml.codes import NvmlUnavailableError, RebootRequiredError, symbol
from kubectl_gpu.nvml.steps import Reset
from kubectl_gpu.usage.readings import GpuReading

__all__ = ["NvmlUnavailableError", "RebootRequiredError", "Reset", "Session", "session", "symbol"]


@contextlib.contextmanager
def session(reset: Reset | None = None) -> Iterator[Session]:
    """NVML initialised for the block (nvmlInit … nvmlShutdown)."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        raise NvmlUnavailableError(f"cannot initialise NVML: {symbol(e)} ({e})") from e
    try:
        yield Session(reset)
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


class Session:
    """The node's GPUs while NVML is initialised."""

    def __init__(self, reset: Reset | None = None) -> None:
        self._reset = reset

    def read_state(self) -> MigState:
        """Every GPU with its MIG mode and GPU/compute instances."""
        return state.read_state()

    def inventory(self) -> list[InventoryGpu]:
        """The physical GPUs with memory, MIG mode and MIG devices (UUID, profile, placement),
        as the node map reads them."""
        return state.inventory()

    def mig_devices(self, index: int) -> tuple[MigDevice, ...]:
        """The MIG devices NVML enumerates on a GPU, with their UUIDs."""
        return state.mig_devices(index)

    def usage(self, since_us: int) -> tuple[GpuReading, ...]:
        """What each GPU, MIG device and compute process uses (`processes.usage`)."""
        return processes.usage(since_us)

    def running_processes(self, index: int) -> tuple[int, ...]:
        """PIDs of the compute processes on a GPU (any of its MIG devices included)."""
        return processes.running_processes(index)

    def check(self, step: plan.CreateGpuInstance) -> None:
        """DeviceError unless NVML has the profile and offers the placement (`steps.check`)."""
        steps.check(step)

    def execute(self, step: plan.Step) -> None:
        """Carry out one plan step; DeviceError (RebootRequiredError for a reset that cannot
        happen) when NVML refuses."""
        steps.execute(step, self._reset)
