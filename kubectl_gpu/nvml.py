"""NVML: read a node's GPUs and MIG state, and carry out MIG plan steps.

The only module that imports `pynvml`. `session()` initialises NVML and shuts it down;
a `Session` reads the live `MigState` and the physical inventory (`gpumap.allocations.Gpu`),
lists a GPU's compute processes, reads what each process uses (`usage`: memory per process,
SM % per process where NVML samples it, the GPU's and each MIG device's own totals: the
plain readings of `usage.readings`), checks planned GPU instances against the profiles and
placements NVML itself reports, and executes `plan` steps, creating GPU instances at their
explicit placements (`nvmlDeviceCreateGpuInstanceWithPlacement`, docs/upstream-facts.md M2.5).
A GPU reset is not an NVML call (`nvidia-smi -r`), so it is injected as `reset`. Every
`NVMLError` becomes a `DeviceError` naming the GPU and NVML's symbol, raised `from` it.
Must not decide anything: which steps to run and in what order is `mig.plan`'s.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pynvml

from kubectl_gpu.errors import DeviceError
from kubectl_gpu.gpumap.allocations import MigDevice
from kubectl_gpu.gpumap.report import InventoryGpu, MigInstance, Placement
from kubectl_gpu.mig import plan
from kubectl_gpu.mig.state import ComputeInstance, GpuInstance, GpuState, MigState
from kubectl_gpu.usage import readings
from kubectl_gpu.usage.readings import GpuReading, MigReading, ProcessReading

Reset = Callable[[int, str], None]  # (GPU index, PCI bus ID); raises DeviceError
_NAME_PREFIX = "MIG "
_NOT_AVAILABLE = 0xFFFFFFFF  # nvmlProcessInfo_t: no GPU/compute instance (MIG off)
_MIB = 1024 * 1024


class RebootRequiredError(DeviceError):
    """A MIG mode change waits for a GPU reset that this node cannot do; only a reboot helps."""


class NvmlUnavailableError(DeviceError):
    """NVML cannot reach the driver from this container ("Unknown Error" after a
    `systemctl daemon-reload`, the driver unloaded or upgraded, a GPU fallen off the bus):
    only a new container helps, so the agent reports itself unhealthy."""


# Codes that mean the container has lost the driver, not that one request was refused.
_UNAVAILABLE = tuple(
    getattr(pynvml, name)
    for name in (
        "NVML_ERROR_UNKNOWN",
        "NVML_ERROR_DRIVER_NOT_LOADED",
        "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
        "NVML_ERROR_GPU_IS_LOST",
        "NVML_ERROR_LIBRARY_NOT_FOUND",
    )
    if hasattr(pynvml, name)
)


@dataclasses.dataclass(frozen=True)
class _Profile:
    id: int
    name: str
    instance_count: int


def symbol(error: pynvml.NVMLError) -> str:
    """NVML's name for an error code, e.g. NVML_ERROR_IN_USE."""
    code = error.value
    for name in dir(pynvml):
        if name.startswith("NVML_ERROR_") and getattr(pynvml, name) == code:
            return name
    return f"NVML error {code}"


def _error(where: str, e: pynvml.NVMLError) -> DeviceError:
    kind = NvmlUnavailableError if e.value in _UNAVAILABLE else DeviceError
    return kind(f"{where}: {symbol(e)} ({e})")


def _optional(read: Callable[[], int]) -> int | None:
    """A reading some GPUs or drivers do not offer: None instead of an error."""
    try:
        return read()
    except pynvml.NVMLError:
        return None


def _instance(value: Any) -> int | None:
    return None if value is None or int(value) == _NOT_AVAILABLE else int(value)


def _memory(handle: Any) -> tuple[int | None, int | None]:
    """(total, used) bytes of a GPU or MIG device; None where NVML does not say."""
    try:
        info = pynvml.nvmlDeviceGetMemoryInfo(handle)
    except pynvml.NVMLError:
        return None, None
    return int(info.total), int(info.used)


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


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

    # -- reading ------------------------------------------------------------------------------

    def read_state(self) -> MigState:
        """Every GPU with its MIG mode and GPU/compute instances."""
        try:
            count = pynvml.nvmlDeviceGetCount()
        except pynvml.NVMLError as e:
            raise _error("cannot count the GPUs", e) from e
        return MigState(tuple(self._gpu_state(i) for i in range(count)))

    def _gpu_state(self, index: int) -> GpuState:
        handle = self._handle(index)
        where = f"GPU {index}"
        try:
            uuid = _text(pynvml.nvmlDeviceGetUUID(handle))
            name = _text(pynvml.nvmlDeviceGetName(handle))
            pci = pynvml.nvmlDeviceGetPciInfo_v3(handle).pciDeviceId
        except pynvml.NVMLError as e:
            raise _error(where, e) from e
        try:
            current, pending = pynvml.nvmlDeviceGetMigMode(handle)
        except pynvml.NVMLError_NotSupported:
            return GpuState(index, uuid, name, pci, mig_capable=False)
        except pynvml.NVMLError as e:
            raise _error(where, e) from e
        on = current == pynvml.NVML_DEVICE_MIG_ENABLE
        instances = self._gpu_instances(index, handle) if on else ()
        return GpuState(
            index, uuid, name, pci, True, on, pending == pynvml.NVML_DEVICE_MIG_ENABLE, instances
        )

    def _gpu_instances(self, index: int, handle: Any) -> tuple[GpuInstance, ...]:
        found = []
        for profile in self._gi_profiles(index, handle).values():
            for gi in self._instances_of(index, handle, profile):
                info = pynvml.nvmlGpuInstanceGetInfo(gi)
                cis = self._compute_instances(index, gi)
                found.append(
                    GpuInstance(
                        info.id, profile.name, info.placement.start, info.placement.size, cis
                    )
                )
        return tuple(sorted(found, key=lambda g: (g.placement_start, g.id)))

    def _instances_of(self, index: int, handle: Any, profile: _Profile) -> list[Any]:
        array = (pynvml.c_nvmlGpuInstance_t * max(1, profile.instance_count))()
        count = ctypes.c_uint()
        try:
            pynvml.nvmlDeviceGetGpuInstances(handle, profile.id, array, ctypes.byref(count))
        except pynvml.NVMLError as e:
            raise _error(f"GPU {index}: listing {profile.name} GPU instances", e) from e
        return [array[i] for i in range(count.value)]

    def _compute_instances(self, index: int, gi: Any) -> tuple[ComputeInstance, ...]:
        found = []
        for profile in self._ci_profiles(gi).values():
            array = (pynvml.c_nvmlComputeInstance_t * max(1, profile.instance_count))()
            count = ctypes.c_uint()
            try:
                pynvml.nvmlGpuInstanceGetComputeInstances(
                    gi, profile.id, array, ctypes.byref(count)
                )
                ids = [pynvml.nvmlComputeInstanceGetInfo(array[i]).id for i in range(count.value)]
            except pynvml.NVMLError as e:
                raise _error(f"GPU {index}: listing compute instances", e) from e
            found += [ComputeInstance(ci, profile.name) for ci in ids]
        return tuple(sorted(found, key=lambda c: c.id))

    def _gi_profiles(self, index: int, handle: Any) -> dict[str, _Profile]:
        """The GPU-instance profiles NVML reports, by name (some drivers only with MIG on)."""
        found: dict[str, _Profile] = {}
        for enum in range(pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT):
            try:
                info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, enum)
            except (pynvml.NVMLError_NotSupported, pynvml.NVMLError_InvalidArgument):
                continue  # nvml.h: skip unsupported profiles
            except pynvml.NVMLError as e:
                raise _error(f"GPU {index}: reading GPU instance profiles", e) from e
            name = _text(info.name).removeprefix(_NAME_PREFIX)
            found.setdefault(name, _Profile(info.id, name, info.instanceCount))
        return found

    def _ci_profiles(self, gi: Any) -> dict[str, _Profile]:
        found: dict[str, _Profile] = {}
        shared = pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
        for enum in range(pynvml.NVML_COMPUTE_INSTANCE_PROFILE_COUNT):
            try:
                info = pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, enum, shared)
            except (pynvml.NVMLError_NotSupported, pynvml.NVMLError_InvalidArgument):
                continue
            name = _text(info.name).removeprefix(_NAME_PREFIX)
            found.setdefault(name, _Profile(info.id, name, info.instanceCount))
        return found

    def inventory(self) -> list[InventoryGpu]:
        """The physical GPUs with memory, MIG mode and MIG devices (UUID, profile, placement),
        as the node map reads them."""
        return [self._inventory_gpu(gpu) for gpu in self.read_state().gpus]

    def _inventory_gpu(self, gpu: GpuState) -> InventoryGpu:
        handle = self._handle(gpu.index)
        minor = _optional(lambda: int(pynvml.nvmlDeviceGetMinorNumber(handle)))
        memory = _optional(lambda: int(pynvml.nvmlDeviceGetMemoryInfo(handle).total) // _MIB)
        mode = ("enabled" if gpu.mode_current else "disabled") if gpu.mig_capable else None
        placements = {
            g.id: Placement(g.placement_start, g.placement_size) for g in gpu.gpu_instances
        }
        devices = tuple(
            MigInstance(
                d.uuid, d.profile, d.gi, d.ci, placements.get(d.gi) if d.gi is not None else None
            )
            for d in (self.mig_devices(gpu.index) if gpu.mode_current else ())
        )
        return InventoryGpu(gpu.index, gpu.uuid, gpu.model, minor, memory, mode, devices)

    def mig_devices(self, index: int, state: GpuState | None = None) -> tuple[MigDevice, ...]:
        """The MIG devices NVML enumerates on a GPU, with their UUIDs (`state`: the GPU's
        state already read, to name their profiles without reading it again)."""
        handle = self._handle(index)
        state = state or self._gpu_state(index)
        names = {(g.id, c.id): c.profile for g in state.gpu_instances for c in g.compute_instances}
        found = []
        try:
            for j in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
                try:
                    mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, j)
                except (pynvml.NVMLError_NotFound, pynvml.NVMLError_InvalidArgument):
                    continue
                gi = pynvml.nvmlDeviceGetGpuInstanceId(mig)
                ci = pynvml.nvmlDeviceGetComputeInstanceId(mig)
                uuid = _text(pynvml.nvmlDeviceGetUUID(mig))
                found.append(MigDevice(uuid, names.get((gi, ci)), gi, ci))
        except pynvml.NVMLError as e:
            raise _error(f"GPU {index}: enumerating MIG devices", e) from e
        return tuple(found)

    # -- what each process uses (kubectl gpu top) --------------------------------------------

    def usage(self, since_us: int) -> tuple[GpuReading, ...]:
        """Every GPU's memory and utilisation, its MIG devices' memory, and its compute
        processes with their memory and SM %, averaged over NVML's samples newer than
        `since_us` (µs since the epoch). A figure NVML does not give is None with its
        reason (`readings.SM_*`); an NVML error on one GPU is raised as a DeviceError."""
        try:
            count = pynvml.nvmlDeviceGetCount()
        except pynvml.NVMLError as e:
            raise _error("cannot count the GPUs", e) from e
        return tuple(self._gpu_usage(i, since_us) for i in range(count))

    def _gpu_usage(self, index: int, since_us: int) -> GpuReading:
        handle = self._handle(index)
        where = f"GPU {index}"
        try:
            uuid = _text(pynvml.nvmlDeviceGetUUID(handle))
            model = _text(pynvml.nvmlDeviceGetName(handle))
        except pynvml.NVMLError as e:
            raise _error(where, e) from e
        mig_on = self._mig_enabled(handle)
        total, used = _memory(handle)
        sm, sm_why = self._device_sm(handle, mig_on)
        migs = self._mig_usage(index) if mig_on else ()
        processes = self._processes(index, handle, migs)
        if mig_on:
            processes = [dataclasses.replace(p, sm_unavailable=readings.SM_MIG) for p in processes]
        else:
            processes = self._with_sm(index, handle, processes, since_us)
        return GpuReading(index, uuid, model, total, used, sm, sm_why, mig_on, migs,
                          tuple(processes))  # fmt: skip

    def _mig_enabled(self, handle: Any) -> bool:
        try:
            current, _ = pynvml.nvmlDeviceGetMigMode(handle)
        except pynvml.NVMLError:  # not MIG-capable
            return False
        return bool(current == pynvml.NVML_DEVICE_MIG_ENABLE)

    def _device_sm(self, handle: Any, mig_on: bool) -> tuple[int | None, str | None]:
        if mig_on:  # NVML: utilisation is not supported on MIG-enabled GPUs
            return None, readings.SM_MIG
        try:
            return int(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu), None
        except pynvml.NVMLError_NotSupported:
            return None, readings.SM_NOT_SUPPORTED
        except pynvml.NVMLError:
            return None, readings.SM_NOT_READ

    def _mig_usage(self, index: int) -> tuple[MigReading, ...]:
        handle = self._handle(index)
        state = self._gpu_state(index)
        placements = {g.id: (g.placement_start, g.placement_size) for g in state.gpu_instances}
        found = []
        for device in self.mig_devices(index, state):
            mig = self._mig_handle(handle, device.gi, device.ci)
            total, used = _memory(mig) if mig is not None else (None, None)
            start, size = placements.get(-1 if device.gi is None else device.gi, (None, None))
            found.append(MigReading(device.uuid, device.profile, device.gi, device.ci, total, used,
                                    start, size))  # fmt: skip
        return tuple(found)

    def _mig_handle(self, handle: Any, gi: int | None, ci: int | None) -> Any:
        try:
            for j in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
                try:
                    mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, j)
                except pynvml.NVMLError:
                    continue
                if (pynvml.nvmlDeviceGetGpuInstanceId(mig),
                        pynvml.nvmlDeviceGetComputeInstanceId(mig)) == (gi, ci):  # fmt: skip
                    return mig
        except pynvml.NVMLError:
            return None
        return None

    def _processes(
        self, index: int, handle: Any, migs: tuple[MigReading, ...]
    ) -> list[ProcessReading]:
        """The GPU's compute processes; on a MIG GPU asked of each MIG device too (drivers
        list a MIG device's processes on its own handle), without repeats."""
        found: dict[tuple[int, int | None, int | None], ProcessReading] = {}
        for p in self._running(index, handle, None):
            found[(p.pid, p.gpu_instance, p.compute_instance)] = p
        for m in migs:
            mig = self._mig_handle(handle, m.gpu_instance, m.compute_instance)
            if mig is None:
                continue
            for p in self._running(index, mig, m):
                found.setdefault((p.pid, p.gpu_instance, p.compute_instance), p)
        return list(found.values())

    def _running(self, index: int, handle: Any, mig: MigReading | None) -> list[ProcessReading]:
        try:
            listed = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        except pynvml.NVMLError_NotSupported:
            return []
        except pynvml.NVMLError as e:
            raise _error(f"GPU {index}: listing processes", e) from e
        found = []
        for p in listed:
            gi = _instance(getattr(p, "gpuInstanceId", None))
            ci = _instance(getattr(p, "computeInstanceId", None))
            if mig is not None and gi is None:
                gi, ci = mig.gpu_instance, mig.compute_instance
            memory = p.usedGpuMemory if isinstance(p.usedGpuMemory, int) else None
            found.append(ProcessReading(int(p.pid), memory, gi, ci))
        return found

    def _with_sm(
        self, index: int, handle: Any, processes: list[ProcessReading], since_us: int
    ) -> list[ProcessReading]:
        """Each process's SM %, the mean of its samples newer than `since_us`."""
        if not processes:
            return processes
        why: str | None = None
        samples: dict[int, list[int]] = {}
        try:
            for sample in pynvml.nvmlDeviceGetProcessUtilization(handle, since_us):
                samples.setdefault(int(sample.pid), []).append(int(sample.smUtil))
        except pynvml.NVMLError_NotFound:
            why = readings.SM_NO_SAMPLES
        except pynvml.NVMLError_NotSupported:
            why = readings.SM_NOT_SUPPORTED
        except pynvml.NVMLError as e:
            # pynvml raises NVMLError(NVML_SUCCESS) when the first call finds no sample
            why = readings.SM_NO_SAMPLES if e.value == pynvml.NVML_SUCCESS else readings.SM_NOT_READ
        return [
            dataclasses.replace(p, sm_percent=round(sum(s) / len(s)))
            if (s := samples.get(p.pid))
            else dataclasses.replace(p, sm_unavailable=why or readings.SM_NO_SAMPLES)
            for p in processes
        ]

    def running_processes(self, index: int) -> tuple[int, ...]:
        """PIDs of the compute processes on a GPU (any of its MIG devices included)."""
        try:
            processes = pynvml.nvmlDeviceGetComputeRunningProcesses(self._handle(index))
        except pynvml.NVMLError as e:
            raise _error(f"GPU {index}: listing processes", e) from e
        return tuple(int(p.pid) for p in processes)

    def _handle(self, index: int) -> Any:
        try:
            return pynvml.nvmlDeviceGetHandleByIndex(index)
        except pynvml.NVMLError as e:
            raise _error(f"GPU {index}", e) from e

    # -- checking and acting ------------------------------------------------------------------

    def check(self, step: plan.CreateGpuInstance) -> None:
        """DeviceError unless NVML has the profile and offers the placement on this GPU.

        A current driver answers this with MIG mode still off (read on an H200, driver 580:
        tests/data/nvml), so a plan is checked before the first change. Where a driver names
        no profile while MIG is off, nothing can be known yet: the check passes, and is made
        again once MIG is on, before the instance is created."""
        handle = self._handle(step.gpu)
        profiles = self._gi_profiles(step.gpu, handle)
        if not profiles and not self._mig_on(step.gpu, handle):
            return
        profile = profiles.get(step.profile)
        if profile is None:
            raise DeviceError(f'GPU {step.gpu}: MIG profile "{step.profile}" not found on this GPU')
        starts = [p.start for p in self._placements(step.gpu, handle, profile)]
        if step.placement_start not in starts:
            raise DeviceError(
                f"GPU {step.gpu}: NVML offers {step.profile} at memory slices {starts}, "
                f"not at {step.placement_start}"
            )

    def _mig_on(self, index: int, handle: Any) -> bool:
        try:
            current, _ = pynvml.nvmlDeviceGetMigMode(handle)
        except pynvml.NVMLError as e:
            raise _error(f"GPU {index}", e) from e
        return bool(current == pynvml.NVML_DEVICE_MIG_ENABLE)

    def _placements(self, index: int, handle: Any, profile: _Profile) -> list[Any]:
        count = ctypes.c_uint()
        try:
            pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(
                handle, profile.id, None, ctypes.byref(count)
            )
            array = (pynvml.c_nvmlGpuInstancePlacement_t * max(1, count.value))()
            pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(
                handle, profile.id, array, ctypes.byref(count)
            )
        except pynvml.NVMLError as e:
            raise _error(f"GPU {index}: placements of {profile.name}", e) from e
        return [array[i] for i in range(count.value)]

    def execute(self, step: plan.Step) -> None:
        """Carry out one plan step; DeviceError (RebootRequiredError for a reset that cannot
        happen) when NVML refuses."""
        where = f"GPU {step.gpu}: {type(step).__name__}"
        try:
            self._dispatch(step)
        except pynvml.NVMLError as e:
            raise _error(where, e) from e

    def _dispatch(self, step: plan.Step) -> None:
        handle = self._handle(step.gpu)
        if isinstance(step, plan.SetMigMode):
            self._set_mode(step, handle)
        elif isinstance(step, plan.ResetGpu):
            self._reset_gpu(step.gpu, handle)
        elif isinstance(step, plan.DestroyComputeInstance):
            gi = pynvml.nvmlDeviceGetGpuInstanceById(handle, step.gi)
            pynvml.nvmlComputeInstanceDestroy(
                pynvml.nvmlGpuInstanceGetComputeInstanceById(gi, step.ci)
            )
        elif isinstance(step, plan.DestroyGpuInstance):
            pynvml.nvmlGpuInstanceDestroy(pynvml.nvmlDeviceGetGpuInstanceById(handle, step.gi))
        elif isinstance(step, plan.CreateGpuInstance):
            self._create_gi(step, handle)
        else:
            self._create_ci(step, handle)

    def _set_mode(self, step: plan.SetMigMode, handle: Any) -> None:
        mode = pynvml.NVML_DEVICE_MIG_ENABLE if step.enabled else pynvml.NVML_DEVICE_MIG_DISABLE
        activation = pynvml.nvmlDeviceSetMigMode(handle, mode)
        # pynvml checks only the call's own return code; the activation status is ours to read
        if activation == pynvml.NVML_ERROR_IN_USE:
            raise DeviceError(
                f"GPU {step.gpu}: MIG mode change refused: NVML_ERROR_IN_USE (the GPU is not idle)"
            )

    def _reset_gpu(self, index: int, handle: Any) -> None:
        """NVML is shut down around the reset: a process holding NVML open keeps the GPU
        "in use" and `nvidia-smi -r` refuses (handles are looked up afresh afterwards)."""
        if self._reset is None:
            raise RebootRequiredError(f"GPU {index}: MIG mode change waits for a GPU reset")
        bus = _text(pynvml.nvmlDeviceGetPciInfo_v3(handle).busId)
        pynvml.nvmlShutdown()
        try:
            self._reset(index, bus)
        finally:
            pynvml.nvmlInit()

    def _create_gi(self, step: plan.CreateGpuInstance, handle: Any) -> None:
        profile = self._gi_profiles(step.gpu, handle)[step.profile]
        size = next(
            p.size
            for p in self._placements(step.gpu, handle, profile)
            if p.start == step.placement_start
        )
        placement = pynvml.c_nvmlGpuInstancePlacement_t(step.placement_start, size)
        pynvml.nvmlDeviceCreateGpuInstanceWithPlacement(handle, profile.id, ctypes.byref(placement))

    def _create_ci(self, step: plan.CreateComputeInstance, handle: Any) -> None:
        profile = self._gi_profiles(step.gpu, handle)[step.gi_profile]
        gi = next(
            gi
            for gi in self._instances_of(step.gpu, handle, profile)
            if pynvml.nvmlGpuInstanceGetInfo(gi).placement.start == step.placement_start
        )
        ci_profile = self._ci_profiles(gi).get(step.profile)
        if ci_profile is None:
            raise DeviceError(f'GPU {step.gpu}: compute profile "{step.profile}" not found')
        pynvml.nvmlGpuInstanceCreateComputeInstance(gi, ci_profile.id)
