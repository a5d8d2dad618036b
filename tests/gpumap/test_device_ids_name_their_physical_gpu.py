"""Every device-ID form in docs/upstream-facts.md N4, and malformed ones, parse to what they say
about the physical GPU behind them."""

from __future__ import annotations

import pytest

from kubectl_gpu.gpumap import deviceid
from kubectl_gpu.gpumap.deviceid import DeviceId, Kind

GPU = "GPU-11ba558d-3437-2335-2fd8-a78c8502f87f"
MIG = "MIG-6e1b7c2a-4d3f-5a8e-9b0c-1f2d3e4a5b6c"
UPPER_GPU = "GPU-4F2C7E1A-9B3D-4C8E-A1F0-6D5B2E8C9A17"

# raw → (kind, gpu_uuid, mig_uuid, replica, gi, ci, index)
WELL_FORMED = {
    GPU: (Kind.GPU, GPU, None, None, None, None, None),
    f"{GPU}::0": (Kind.GPU, GPU, None, 0, None, None, None),
    f"{GPU}::47": (Kind.GPU, GPU, None, 47, None, None, None),
    UPPER_GPU: (Kind.GPU, UPPER_GPU, None, None, None, None, None),
    MIG: (Kind.MIG, None, MIG, None, None, None, None),
    f"{MIG}::7": (Kind.MIG, None, MIG, 7, None, None, None),
    f"MIG-{GPU}/1/0": (Kind.LEGACY_MIG, GPU, f"MIG-{GPU}/1/0", None, 1, 0, None),
    f"MIG-{GPU}/13/2::3": (Kind.LEGACY_MIG, GPU, f"MIG-{GPU}/13/2", 3, 13, 2, None),
    "tegra": (Kind.TEGRA, None, None, None, None, None, None),
    "tegra::2": (Kind.TEGRA, None, None, 2, None, None, None),
    "nvidia0": (Kind.GKE, None, None, None, None, None, 0),
    "nvidia12": (Kind.GKE, None, None, None, None, None, 12),
    "nvidia1/vgpu3": (Kind.GKE, None, None, 3, None, None, 1),
    "nvidia2/gi5": (Kind.GKE, None, None, None, 5, None, 2),
    "nvidia2/gi5/vgpu0": (Kind.GKE, None, None, 0, 5, None, 2),
}

MALFORMED = [
    "",
    "GPU-",
    "GPU-11ba558d",  # truncated UUID
    f"{GPU}x",
    f" {GPU}",
    f"{GPU}::",  # replica separator without a number
    f"{GPU}::-1",
    f"{GPU}::one",
    f"{GPU}::1::2",  # two replica suffixes
    f"gpu-{GPU[4:]}",  # NVML writes the prefix in capitals
    "GPU-11ba558d-3437-2335-2fd8-a78c8502f87g",  # not hex
    f"MIG-{GPU}/1",  # legacy form missing its compute instance
    f"MIG-{GPU}/a/0",
    f"MIG-{GPU}/1/0/2",
    "MIG-GPU-/1/0",
    "nvidia",
    "nvidia-0",
    "nvidia0/gi",
    "nvidia0/vgpu1/gi2",  # GKE writes the GPU instance first
    "nvidia0/vgpu1::2",  # two replica markers
    "Tegra",
    "amd.com/gpu-0",
    "0000:3b:00.0",
]


@pytest.mark.parametrize("raw", WELL_FORMED)
def test_each_known_form_says_what_it_names(raw: str) -> None:
    kind, gpu_uuid, mig_uuid, replica, gi, ci, index = WELL_FORMED[raw]

    assert deviceid.parse(raw) == DeviceId(kind, gpu_uuid, mig_uuid, replica, gi, ci, index, raw)


@pytest.mark.parametrize("raw", MALFORMED)
def test_malformed_ids_are_unknown_and_resolve_to_nothing(raw: str) -> None:
    parsed = deviceid.parse(raw)

    assert parsed.kind is Kind.UNKNOWN
    assert (parsed.gpu_uuid, parsed.mig_uuid, parsed.replica) == (None, None, None)
    assert parsed.raw == raw and parsed.physical == raw


@pytest.mark.parametrize(
    ("raw", "physical"),
    [
        (f"{GPU}::3", GPU),
        (f"{MIG}::0", MIG),
        (f"MIG-{GPU}/1/0::2", f"MIG-{GPU}/1/0"),
        ("nvidia0/gi1/vgpu4", "nvidia0/gi1"),
        ("nvidia0::4", "nvidia0"),
        (GPU, GPU),
    ],
)
def test_the_physical_id_drops_only_the_replica(raw: str, physical: str) -> None:
    assert deviceid.parse(raw).physical == physical


@pytest.mark.parametrize(
    ("raw", "is_mig"),
    [
        (GPU, False),
        (MIG, True),
        (f"MIG-{GPU}/1/0", True),
        ("nvidia0/gi1", True),
        ("nvidia0", False),
    ],
)
def test_mig_ids_are_told_apart_from_whole_gpus(raw: str, is_mig: bool) -> None:
    assert deviceid.parse(raw).is_mig is is_mig


def test_replicas_of_one_gpu_share_its_uuid() -> None:
    replicas = [deviceid.parse(f"{GPU}::{n}") for n in range(4)]

    assert {r.gpu_uuid for r in replicas} == {GPU}
    assert [r.replica for r in replicas] == [0, 1, 2, 3]
