"""`plan.make` touches only what differs: matching instances stay, mode changes and resets only
where needed, GPUs outside the config untouched; and it refuses what cannot be applied."""

from __future__ import annotations

from typing import Any

import pytest

from kubectl_gpu.mig import models, plan
from kubectl_gpu.mig.fit import MigFitError
from kubectl_gpu.mig.plan import (
    CreateComputeInstance,
    CreateGpuInstance,
    DestroyComputeInstance,
    DestroyGpuInstance,
    ResetGpu,
    SetMigMode,
)
from kubectl_gpu.mig.spec import MigConfigFile, MigDeviceSpec
from kubectl_gpu.mig.state import ComputeInstance, GpuInstance, GpuState, MigState

A100 = models.find("A100-40GB")[1]
H100 = models.find("H100-80GB")[1]
L4_ID = 0x27B810DE


def specs(*entries: dict[str, Any]) -> tuple[MigDeviceSpec, ...]:
    return MigConfigFile.from_dict({"version": "v1", "mig-configs": {"c": list(entries)}}).select(
        "c"
    )


def enabled(layout: dict[str, int], devices: Any = "all") -> dict[str, Any]:
    return {"devices": devices, "mig-enabled": True, "mig-devices": layout}


DISABLED = {"devices": "all", "mig-enabled": False}


def gi(gi_id: int, profile: str, start: int, size: int, *cis: str) -> GpuInstance:
    computes = tuple(ComputeInstance(i, p) for i, p in enumerate(cis or (profile,)))
    return GpuInstance(gi_id, profile, start, size, computes)


def gpu(
    index: int = 0, product: models.Product = A100, on: bool = True, *gis: GpuInstance
) -> GpuState:
    return GpuState(index, f"GPU-{index}", product.name, product.pci_device_id, True, on, on, gis)


BALANCED = (
    gi(1, "2g.10gb", 0, 2),
    gi(2, "1g.5gb", 2, 1),
    gi(3, "1g.5gb", 3, 1),
    gi(4, "3g.20gb", 4, 4),
)


def test_a_layout_already_in_place_needs_no_step() -> None:
    state = MigState((gpu(0, A100, True, *BALANCED),))
    assert plan.make(state, specs(enabled({"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}))) == ()


def test_a_changed_layout_destroys_only_the_instances_that_differ() -> None:
    state = MigState((gpu(0, A100, True, *BALANCED),))
    steps = plan.make(state, specs(enabled({"1g.10gb": 1, "2g.10gb": 1, "3g.20gb": 1})))
    assert steps == (
        DestroyComputeInstance(0, 2, 0),
        DestroyGpuInstance(0, 2),
        DestroyComputeInstance(0, 3, 0),
        DestroyGpuInstance(0, 3),
        CreateGpuInstance(0, "1g.10gb", 2),
        CreateComputeInstance(0, "1g.10gb", 2, "1g.10gb"),
    )


def test_kept_instances_that_block_the_new_ones_are_moved() -> None:
    state = MigState((gpu(0, A100, True, gi(7, "3g.20gb", 0, 4)),))
    steps = plan.make(state, specs(enabled({"4g.20gb": 1, "3g.20gb": 1})))
    assert steps == (
        DestroyComputeInstance(0, 7, 0),
        DestroyGpuInstance(0, 7),
        CreateGpuInstance(0, "4g.20gb", 0),
        CreateComputeInstance(0, "4g.20gb", 0, "4g.20gb"),
        CreateGpuInstance(0, "3g.20gb", 4),
        CreateComputeInstance(0, "3g.20gb", 4, "3g.20gb"),
    )


def test_new_compute_instances_replace_the_gpu_instance_holding_others() -> None:
    state = MigState((gpu(0, A100, True, gi(4, "3g.20gb", 4, 4)),))
    steps = plan.make(state, specs(enabled({"1c.3g.20gb": 3})))
    assert steps[:2] == (DestroyComputeInstance(0, 4, 0), DestroyGpuInstance(0, 4))
    assert [s for s in steps if isinstance(s, CreateComputeInstance)] == [
        CreateComputeInstance(0, "3g.20gb", 0, "1c.3g.20gb")
    ] * 3


def test_an_a100_with_mig_disabled_is_enabled_then_reset_then_partitioned() -> None:
    state = MigState((gpu(0, A100, False),))
    steps = plan.make(state, specs(enabled({"7g.40gb": 1})))
    assert steps == (
        SetMigMode(0, True),
        ResetGpu(0),
        CreateGpuInstance(0, "7g.40gb", 0),
        CreateComputeInstance(0, "7g.40gb", 0, "7g.40gb"),
    )


def test_an_h100_switches_mode_without_a_reset() -> None:
    state = MigState((gpu(0, H100, False),))
    steps = plan.make(state, specs(enabled({"7g.80gb": 1})))
    assert steps[:2] == (SetMigMode(0, True), CreateGpuInstance(0, "7g.80gb", 0))


def test_a_pending_mode_change_needs_only_the_reset() -> None:
    pending = GpuState(0, "GPU-0", A100.name, A100.pci_device_id, True, False, True)
    steps = plan.make(MigState((pending,)), specs(enabled({"7g.40gb": 1})))
    assert steps[0] == ResetGpu(0)
    assert not any(isinstance(s, SetMigMode) for s in steps)


def test_disabling_mig_destroys_every_instance_first() -> None:
    state = MigState((gpu(0, A100, True, gi(4, "3g.20gb", 4, 4, "1c.3g.20gb", "2c.3g.20gb")),))
    assert plan.make(state, specs(DISABLED)) == (
        DestroyComputeInstance(0, 4, 0),
        DestroyComputeInstance(0, 4, 1),
        DestroyGpuInstance(0, 4),
        SetMigMode(0, False),
        ResetGpu(0),
    )
    assert plan.make(MigState((gpu(0, A100, False),)), specs(DISABLED)) == ()


def test_a_gpu_no_spec_selects_is_left_alone() -> None:
    state = MigState((gpu(0, A100, False), gpu(1, A100, True, *BALANCED)))
    steps = plan.make(state, specs(enabled({"7g.40gb": 1}, devices=[0])))
    assert {s.gpu for s in steps} == {0}


def test_a_gpu_without_mig_is_left_alone() -> None:
    l4 = GpuState(1, "GPU-1", "NVIDIA L4", L4_ID, False)
    state = MigState((gpu(0, A100, True), l4))
    steps = plan.make(state, specs(enabled({"7g.40gb": 1})))
    assert {s.gpu for s in steps} == {0}


def test_a_layout_that_does_not_fit_is_refused_before_any_step() -> None:
    state = MigState((gpu(0, A100, True), gpu(1, H100, True)))
    with pytest.raises(MigFitError) as raised:
        plan.make(state, specs(enabled({"1g.5gb": 7})))
    assert raised.value.message.startswith(
        "GPU 1 (NVIDIA H100 80GB HBM3): profile 1g.5gb does not exist on NVIDIA H100 80GB HBM3"
    )


def test_mig_enabled_on_a_listed_gpu_without_mig_is_refused() -> None:
    l4 = GpuState(0, "GPU-0", "NVIDIA L4", L4_ID, False)
    with pytest.raises(MigFitError, match="cannot set MIG config on non MIG-capable GPU"):
        plan.make(MigState((l4,)), specs(enabled({"1g.5gb": 1}, devices=[0])))


def test_the_device_plugin_strategy_is_checked() -> None:
    state = MigState((gpu(0, A100, False),))
    balanced = specs(enabled({"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}))
    with pytest.raises(plan.MigStrategyError, match="more than one MIG device type"):
        plan.make(state, balanced, strategy="single")
    assert plan.make(state, balanced, strategy="mixed")
