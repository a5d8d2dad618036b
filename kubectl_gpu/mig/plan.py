"""From a node's live MIG state to a selected mig-parted config: the steps, as data.

Owns `make` and the `Step` values the node agent executes through NVML. Unlike mig-parted,
which clears every instance and retries orderings of an unplaced create (docs/upstream-facts.md M2),
the plan keeps the instances that already match, destroys only those that differ, creates
the rest at explicit placements, largest first (docs/upstream-facts.md M2.5), and changes MIG mode
only where the mode differs, with a GPU reset where the mode change waits for one (GA100;
docs/upstream-facts.md M2.1). GPUs no spec selects, and GPUs that are not MIG-capable, are left
alone. Must not execute anything, read the clock or talk to NVML. Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TypeAlias

from kubectl_gpu.errors import GpuError
from kubectl_gpu.mig import fit, geometry, models, nodes, verdicts
from kubectl_gpu.mig.fit import GiRequest, Layout, MigFitError
from kubectl_gpu.mig.geometry import Placement
from kubectl_gpu.mig.models import GpuModel
from kubectl_gpu.mig.spec import MigDeviceSpec
from kubectl_gpu.mig.state import GpuInstance, GpuState, MigState
from kubectl_gpu.mig.verdicts import GpuVerdict, Status


class MigStrategyError(GpuError):
    """The layout fits every GPU, but the device plugin's MIG strategy would refuse the node."""


@dataclasses.dataclass(frozen=True)
class SetMigMode:
    """Enable or disable MIG mode on a GPU (nvmlDeviceSetMigMode)."""

    gpu: int
    enabled: bool


@dataclasses.dataclass(frozen=True)
class ResetGpu:
    """Reset a GPU so that its pending MIG mode becomes current."""

    gpu: int


@dataclasses.dataclass(frozen=True)
class DestroyComputeInstance:
    """Destroy compute instance `ci` of GPU instance `gi` (NVML ids)."""

    gpu: int
    gi: int
    ci: int


@dataclasses.dataclass(frozen=True)
class DestroyGpuInstance:
    """Destroy GPU instance `gi` (NVML id); its compute instances are destroyed before."""

    gpu: int
    gi: int


@dataclasses.dataclass(frozen=True)
class CreateGpuInstance:
    """Create a GPU instance of `profile` at memory slice `placement_start`."""

    gpu: int
    profile: str
    placement_start: int


@dataclasses.dataclass(frozen=True)
class CreateComputeInstance:
    """Create a compute instance (MIG device `profile`) in the GPU instance of `gi_profile`
    created at `placement_start`."""

    gpu: int
    gi_profile: str
    placement_start: int
    profile: str


Step: TypeAlias = (
    SetMigMode
    | ResetGpu
    | DestroyComputeInstance
    | DestroyGpuInstance
    | CreateGpuInstance
    | CreateComputeInstance
)


def make(
    current: MigState, desired: Sequence[MigDeviceSpec], *, strategy: str | None = None
) -> tuple[Step, ...]:
    """The steps that turn `current` into the config `desired` (the specs of one name).

    Raises MigFitError when a selected GPU cannot take its layout, MigStrategyError when the
    device plugin's `strategy` (single or mixed) would refuse the result.
    """
    checked = verdicts.check("desired", desired, nodes.state_target(current), strategy)
    _refuse(checked)
    steps: list[Step] = []
    for verdict in checked.gpus:
        if verdict.status is Status.FITS and verdict.gpu.mig_capable and verdict.spec is not None:
            gpu = current.gpu(verdict.gpu.index)
            steps.extend(_gpu_steps(gpu, verdict, desired[verdict.spec]))
    return tuple(steps)


def _refuse(checked: verdicts.ConfigVerdict) -> None:
    for verdict in checked.gpus:
        if verdict.status is Status.DOES_NOT_FIT:
            gpu = verdict.gpu
            raise MigFitError(
                f"GPU {gpu.index} ({gpu.name}): {verdict.problem}", profile="", reason="gpu"
            )
    if checked.problems:
        raise MigStrategyError(checked.problems[0])


def _gpu_steps(gpu: GpuState, verdict: GpuVerdict, spec: MigDeviceSpec) -> list[Step]:
    want = bool(verdict.mig_enabled)
    mode = _mode_steps(gpu, want)
    current = gpu.gpu_instances if gpu.mode_current else ()
    if not want:
        return _destroy(gpu.index, current) + mode
    model = verdict.gpu.model
    assert model is not None  # a MIG-enabled layout fitted, so the model is known
    kept, layout = _arrange(model, current, fit.requests(model, spec.mig_devices))
    gone = [g for g in current if g not in kept]
    return _destroy(gpu.index, gone) + mode + _create(gpu.index, layout)


def _mode_steps(gpu: GpuState, want: bool) -> list[Step]:
    steps: list[Step] = []
    if gpu.mode_pending != want:
        steps.append(SetMigMode(gpu.index, want))
    waits = gpu.mode_pending == want or models.needs_reset_for_mode_change(gpu.pci_device_id)
    if gpu.mode_current != want and waits:
        steps.append(ResetGpu(gpu.index))
    return steps


def _destroy(gpu: int, instances: Sequence[GpuInstance]) -> list[Step]:
    steps: list[Step] = []
    for instance in instances:
        steps.extend(
            DestroyComputeInstance(gpu, instance.id, ci.id) for ci in instance.compute_instances
        )
        steps.append(DestroyGpuInstance(gpu, instance.id))
    return steps


def _create(gpu: int, layout: Layout) -> list[Step]:
    steps: list[Step] = []
    for placed in layout:  # already largest first
        start = placed.placement.start
        steps.append(CreateGpuInstance(gpu, placed.profile.name, start))
        steps.extend(
            CreateComputeInstance(gpu, placed.profile.name, start, device.name)
            for device in placed.compute_instances
        )
    return steps


Key = tuple[str, tuple[str, ...]]


def _arrange(
    model: GpuModel, current: Sequence[GpuInstance], wanted: Sequence[GiRequest]
) -> tuple[list[GpuInstance], Layout]:
    """The current instances to keep and the placed instances to create.

    First keep every current instance that some wanted one matches and place the others
    around them; when they do not fit around, place everything afresh and keep only the
    current instances that sit exactly where the fresh layout puts their twin.
    """
    kept, rest = _claim(current, wanted)
    taken = geometry.mask(_placement(g) for g in kept)
    try:
        return kept, fit.place(model, rest, taken)
    except MigFitError:
        return _reuse(current, fit.place(model, wanted))


def _claim(
    current: Sequence[GpuInstance], wanted: Sequence[GiRequest]
) -> tuple[list[GpuInstance], list[GiRequest]]:
    rest = list(wanted)
    kept = []
    for instance in current:
        twin = next((r for r in rest if _request_key(r) == _instance_key(instance)), None)
        if twin is not None:
            rest.remove(twin)
            kept.append(instance)
    return kept, rest


def _reuse(current: Sequence[GpuInstance], layout: Layout) -> tuple[list[GpuInstance], Layout]:
    unused = list(current)
    kept, create = [], []
    for placed in layout:
        twin = next((g for g in unused if _same_place(g, placed)), None)
        if twin is None:
            create.append(placed)
        else:
            unused.remove(twin)
            kept.append(twin)
    return kept, tuple(create)


def _same_place(instance: GpuInstance, placed: fit.PlacedInstance) -> bool:
    key = (placed.profile.name, tuple(sorted(d.name for d in placed.compute_instances)))
    return _instance_key(instance) == key and _placement(instance) == placed.placement


def _request_key(request: GiRequest) -> Key:
    return request.profile.name, tuple(sorted(d.name for d in request.compute_instances))


def _instance_key(instance: GpuInstance) -> Key:
    return instance.profile, tuple(sorted(ci.profile for ci in instance.compute_instances))


def _placement(instance: GpuInstance) -> Placement:
    return Placement(instance.placement_start, instance.placement_size)
