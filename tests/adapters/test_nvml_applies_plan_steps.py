"""kubectl_gpu.nvml against the NVML stand-in: live state, explicit placements, NVML error names."""

from __future__ import annotations

import pytest

from kubectl_gpu import nvml
from kubectl_gpu.errors import DeviceError
from kubectl_gpu.mig import plan
from kubectl_gpu.mig.spec import MigConfigFile
from tests.kit.node.libnvml import Gpu
from tests.kit.node.libnvml.fixture import MakeFakeNvml

BALANCED = {
    "version": "v1",
    "mig-configs": {
        "balanced": [
            {
                "devices": "all",
                "mig-enabled": True,
                "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
            }
        ],
        "off": [{"devices": "all", "mig-enabled": False}],
    },
}


def _apply(session: nvml.Session, name: str) -> list[tuple[str, int]]:
    specs = MigConfigFile.from_dict(BALANCED).select(name)
    steps = plan.make(session.read_state(), specs)
    for step in steps:
        session.execute(step)
    return sorted(
        (s.profile, s.placement_start) for s in steps if isinstance(s, plan.CreateGpuInstance)
    )


def test_a_plan_applied_through_nvml_reads_back_with_its_placements(
    fake_nvml: MakeFakeNvml,
) -> None:
    lib = fake_nvml(gpus=["H100-SXM5-80GB"])
    with nvml.session() as session:
        planned = _apply(session, "balanced")
        gpu = session.read_state().gpu(0)
        devices = session.mig_devices(0)
    assert gpu.mode_current
    placed = sorted((g.profile, g.placement_start) for g in gpu.gpu_instances)
    assert placed == planned
    assert [p for p, _ in placed] == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    assert len(devices) == 4 and all(d.uuid.startswith("MIG-") for d in devices)
    assert "nvmlDeviceCreateGpuInstanceWithPlacement" in lib.calls
    assert "nvmlDeviceCreateGpuInstance" not in lib.calls
    assert not lib.initialized  # the session shut NVML down


def test_a_mode_change_waiting_for_a_reset_calls_the_injected_reset(
    fake_nvml: MakeFakeNvml,
) -> None:
    lib = fake_nvml(gpus=["A100-SXM4-40GB"])
    resets: list[tuple[int, str]] = []

    def reset(index: int, bus: str) -> None:
        resets.append((index, bus))
        assert lib.reset(index) == 0

    with nvml.session(reset) as session:
        steps = plan.make(session.read_state(), _a100("balanced"))
        assert plan.ResetGpu(0) in steps
        for step in steps:
            session.execute(step)
        assert session.read_state().gpu(0).mode_current
    assert resets == [(0, "00000000:18:00.0")]


def test_without_a_reset_the_mode_change_asks_for_a_reboot(fake_nvml: MakeFakeNvml) -> None:
    fake_nvml(gpus=["A100-SXM4-40GB"])
    with nvml.session() as session:
        steps = plan.make(session.read_state(), _a100("balanced"))
        session.execute(steps[0])
        with pytest.raises(nvml.RebootRequiredError, match="GPU 0"):
            session.execute(steps[1])


def test_a_busy_gpu_instance_is_refused_with_nvml_in_use(fake_nvml: MakeFakeNvml) -> None:
    gpu = Gpu.of("H100-SXM5-80GB", 0)
    lib = fake_nvml(gpus=[gpu])
    with nvml.session() as session:
        _apply(session, "balanced")
        state = session.read_state().gpu(0)
        gi = state.gpu_instances[0]
        lib.add_process(0, 4242, mig_device=(gi.id, gi.compute_instances[0].id))
        assert session.running_processes(0) == (4242,)
        with pytest.raises(DeviceError, match="NVML_ERROR_IN_USE") as caught:
            session.execute(plan.DestroyGpuInstance(0, gi.id))
    assert caught.value.__cause__ is not None


def test_a_placement_nvml_does_not_offer_is_caught_before_creating(
    fake_nvml: MakeFakeNvml,
) -> None:
    fake_nvml(gpus=["H100-SXM5-80GB"])
    with nvml.session() as session:
        session.execute(plan.SetMigMode(0, True))
        session.check(plan.CreateGpuInstance(0, "3g.40gb", 4))
        with pytest.raises(DeviceError, match="not at 2"):
            session.check(plan.CreateGpuInstance(0, "3g.40gb", 2))
        with pytest.raises(DeviceError, match="not found on this GPU"):
            session.check(plan.CreateGpuInstance(0, "1g.5gb", 0))


def test_profiles_and_placements_are_checked_with_mig_mode_still_off(
    fake_nvml: MakeFakeNvml,
) -> None:
    """As a real H200 answered on driver 580 (tests/data/nvml): no MIG change is needed to ask."""
    lib = fake_nvml(gpus=["H200-SXM-141GB"])
    with nvml.session() as session:
        session.check(plan.CreateGpuInstance(0, "1g.35gb", 6))
        with pytest.raises(DeviceError, match="not at 5"):
            session.check(plan.CreateGpuInstance(0, "1g.35gb", 5))
        with pytest.raises(DeviceError, match="not found on this GPU"):
            session.check(plan.CreateGpuInstance(0, "1g.10gb", 0))
    assert not lib.gpu(0).mig_enabled


def test_inventory_lists_mig_devices_under_their_gpu(fake_nvml: MakeFakeNvml) -> None:
    fake_nvml(gpus=["H100-SXM5-80GB", "L4"])
    with nvml.session() as session:
        _apply(session, "balanced")
        gpus = session.inventory()
    assert [g.model for g in gpus] == ["NVIDIA H100 80GB HBM3", "NVIDIA L4"]
    assert sorted(d.profile or "" for d in gpus[0].mig_devices) == [
        "1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"
    ]  # fmt: skip
    assert gpus[1].mig_devices == ()
    assert (gpus[0].memory_mib, gpus[0].mig_mode, gpus[1].mig_mode) == (81559, "enabled", None)
    placed = {
        (d.profile, d.placement.start, d.placement.size) for d in gpus[0].mig_devices if d.placement
    }
    assert ("3g.40gb", 4, 4) in placed and len(placed) == 4


def _a100(name: str) -> tuple[object, ...]:
    doc = {
        "version": "v1",
        "mig-configs": {
            "balanced": [
                {
                    "devices": "all",
                    "mig-enabled": True,
                    "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
                }
            ]
        },
    }
    return MigConfigFile.from_dict(doc).select(name)
