"""`plan.make` steps, applied by a small simulator of NVML's rules, produce exactly the desired
layout on every model, for every layout the fitter accepts; planning again then does nothing.

The simulator enforces what NVML enforces: instances only while MIG mode is on, placements the
model allows (the NVML stand-in's tables where it has the model), no overlapping memory slices,
a mode change on GA100 waits for a reset, no mode change while instances exist, a GPU instance
is destroyed only when empty.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from typing import Any

import pytest

from kubectl_gpu.mig import fit, models, plan, profiles
from kubectl_gpu.mig.spec import MigConfigFile, MigDeviceSpec
from kubectl_gpu.mig.state import ComputeInstance, GpuInstance, GpuState, MigState
from tests.kit.node.libnvml import models as stand_in

FAKE_BY_ID = {m.pci_device_id: m for m in stand_in.MODELS.values() if m.profiles}


def allowed_placements(model: models.GpuModel) -> dict[str, set[tuple[int, int]]]:
    fake = FAKE_BY_ID.get(model.products[0].pci_device_id)
    if fake is not None:
        return {p.name: {(x.start, x.size) for x in p.placements} for p in fake.profiles}
    return {p.name: {(x.start, x.size) for x in p.placements} for p in model.profiles}


@dataclasses.dataclass
class SimGpu:
    state: GpuState
    places: dict[str, set[tuple[int, int]]]
    gis: dict[int, GpuInstance] = dataclasses.field(default_factory=dict)
    ids: itertools.count[int] = dataclasses.field(default_factory=lambda: itertools.count(1))

    def apply(self, step: plan.Step) -> None:
        handler = getattr(self, "_" + type(step).__name__)
        handler(step)

    def _SetMigMode(self, step: plan.SetMigMode) -> None:
        assert not self.gis, "NVML refuses a mode change while instances exist"
        immediate = not models.needs_reset_for_mode_change(self.state.pci_device_id)
        current = step.enabled if immediate else self.state.mode_current
        self.state = dataclasses.replace(
            self.state, mode_pending=step.enabled, mode_current=current
        )

    def _ResetGpu(self, step: plan.ResetGpu) -> None:
        assert not self.gis
        self.state = dataclasses.replace(self.state, mode_current=self.state.mode_pending)

    def _CreateGpuInstance(self, step: plan.CreateGpuInstance) -> None:
        assert self.state.mode_current, "MIG mode is off"
        (size,) = {s for start, s in self.places[step.profile] if start == step.placement_start}
        wanted = set(range(step.placement_start, step.placement_start + size))
        for gi in self.gis.values():
            taken = set(range(gi.placement_start, gi.placement_start + gi.placement_size))
            assert not wanted & taken, f"{step} overlaps {gi}"
        gi_id = next(self.ids)
        self.gis[gi_id] = GpuInstance(gi_id, step.profile, step.placement_start, size)

    def _CreateComputeInstance(self, step: plan.CreateComputeInstance) -> None:
        (gi,) = [
            g
            for g in self.gis.values()
            if (g.profile, g.placement_start) == (step.gi_profile, step.placement_start)
        ]
        ci = ComputeInstance(len(gi.compute_instances), step.profile)
        self.gis[gi.id] = dataclasses.replace(gi, compute_instances=(*gi.compute_instances, ci))
        used = sum(
            profiles.parse(c.profile).compute_slices for c in self.gis[gi.id].compute_instances
        )
        assert used <= profiles.parse(gi.profile).gpu_slices

    def _DestroyComputeInstance(self, step: plan.DestroyComputeInstance) -> None:
        gi = self.gis[step.gi]
        left = tuple(c for c in gi.compute_instances if c.id != step.ci)
        assert len(left) == len(gi.compute_instances) - 1
        self.gis[gi.id] = dataclasses.replace(gi, compute_instances=left)

    def _DestroyGpuInstance(self, step: plan.DestroyGpuInstance) -> None:
        assert not self.gis[step.gi].compute_instances, "NVML: IN_USE"
        del self.gis[step.gi]

    def result(self) -> GpuState:
        return dataclasses.replace(self.state, gpu_instances=tuple(self.gis.values()))


def simulate(state: MigState, steps: tuple[plan.Step, ...]) -> MigState:
    sims = {
        g.index: SimGpu(g, allowed_placements(_model(g)), {gi.id: gi for gi in g.gpu_instances})
        for g in state.gpus
    }
    for sim in sims.values():  # NVML never reuses the id of a live instance
        sim.ids = itertools.count(max(sim.gis, default=0) + 1)
    for step in steps:
        sims[step.gpu].apply(step)
    return MigState(tuple(sim.result() for sim in sims.values()))


def _model(gpu: GpuState) -> models.GpuModel:
    found = models.by_pci_id(gpu.pci_device_id)
    assert found is not None
    return found[0]


def fresh(model: models.GpuModel, count: int = 1, **kw: Any) -> MigState:
    product = model.products[0]
    return MigState(
        tuple(
            GpuState(i, f"GPU-{i}", product.name, product.pci_device_id, True, **kw)
            for i in range(count)
        )
    )


def config(
    layout: dict[str, int], enabled: bool = True, devices: Any = "all"
) -> tuple[MigDeviceSpec, ...]:
    spec: dict[str, Any] = {"devices": devices, "mig-enabled": enabled}
    if enabled:
        spec["mig-devices"] = layout
    return MigConfigFile.from_dict({"version": "v1", "mig-configs": {"c": [spec]}}).select("c")


def instances(state: MigState, index: int = 0) -> Counter[tuple[str, tuple[str, ...]]]:
    return Counter(
        (gi.profile, tuple(sorted(c.profile for c in gi.compute_instances)))
        for gi in state.gpu(index).gpu_instances
    )


def valid_layouts(model: models.GpuModel) -> list[dict[str, int]]:
    """Every multiset of base profiles the fitter accepts, and each with one +me profile."""
    base = [p for p in model.profiles if "+" not in p.name and "-" not in p.name]
    with_me = [p for p in model.profiles if p.media_extensions]
    found = []
    for counts in itertools.product(*(range(p.max_instances + 1) for p in base)):
        layout = {p.name: n for p, n in zip(base, counts, strict=True) if n}
        for extra in [None, *with_me]:
            candidate = {**layout, extra.name: 1} if extra else layout
            try:
                fit.layout(model, [(profiles.parse(k), n) for k, n in candidate.items()])
            except fit.MigFitError:
                continue
            found.append(candidate)
    return found


@pytest.mark.parametrize("model", models.MODELS, ids=lambda m: m.key)
def test_every_valid_layout_round_trips_from_a_fresh_gpu(model: models.GpuModel) -> None:
    layouts = valid_layouts(model)
    assert len(layouts) >= 20
    start = fresh(model)
    for layout in layouts:
        desired = config(layout)
        after = simulate(start, plan.make(start, desired))
        gpu = after.gpu(0)
        assert gpu.mode_current and gpu.mode_pending
        made = Counter(gi.profile for gi in gpu.gpu_instances)
        assert made == Counter(layout), layout
        assert all(
            [c.profile for c in gi.compute_instances] == [gi.profile] for gi in gpu.gpu_instances
        )
        assert plan.make(after, desired) == (), layout


@pytest.mark.parametrize(
    "model", [m for m in models.MODELS if m.key in ("A100-40GB", "A30")], ids=lambda m: m.key
)
def test_every_layout_can_replace_every_other(model: models.GpuModel) -> None:
    layouts = valid_layouts(model)[::7]  # a spread sample: the pairs grow quadratically
    states = {}
    for layout in layouts:
        states[tuple(layout.items())] = simulate(
            fresh(model), plan.make(fresh(model), config(layout))
        )
    for before, after_layout in itertools.product(states.values(), layouts):
        after = simulate(before, plan.make(before, config(after_layout)))
        assert Counter(gi.profile for gi in after.gpu(0).gpu_instances) == Counter(after_layout)
