"""GPU models the NVML stand-in can play, with their MIG geometry (test code only).

Owns: per-model facts (NVML product name, PCI device ID, memory, compute capability, how a MIG
mode change activates) and the GPU-instance profile tables: NVML enum, nvidia-smi profile ID,
name, slices, instance cap, placements in memory slices, memory and engine counts. Compute-instance
profiles are derived from a GPU-instance profile. Must not: hold state (that is device.py) or know
about ctypes (that is marshal.py and the symbol modules).

Sources (docs/upstream-facts.md M4): placements and profile IDs from the MIG guide's `-lgipp` table
and docs/upstream-facts.md M4.2 (NOT the go-nvml mocks, whose 3g/7g sizes are wrong). Memory and
engine counts are real `nvidia-smi mig -lgip` readings where one was found: A100-40GB from
docs/upstream-facts.md M4.2; A100-80GB (driver 515, SM 14 per slice); H100 80GB HBM3 from a public
lgip listing; H200 from a real NVML reading (tests/data/nvml, driver 580.159.04: memory, engines,
placements and PCI IDs). Derived values, marked ``# derived``, follow the nearest real board. Board
totals (MiB) are NVML's ``memory.total`` as reported publicly (H100 81559, H200 143771, A100
81920/40960, L4 23034).
"""

from __future__ import annotations

from dataclasses import dataclass

import pynvml

GIB_MIB = 1024

# Enums whose GPU instances carry the GPU's single media-extension set (JPEG/OFA); at most one
# such instance exists per GPU (docs/upstream-facts.md M4.1, A30 exclusivity inferred there).
MEDIA_EXTENSION_ENUMS = frozenset(
    {
        pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1,
        pynvml.NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1,
        pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME,
        pynvml.NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME,
    }
)

# Compute-instance enum per compute-slice count (NVML_COMPUTE_INSTANCE_PROFILE_*).
_CI_ENUM_BY_SLICES = {
    1: pynvml.NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE,
    2: pynvml.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE,
    3: pynvml.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE,
    4: pynvml.NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE,
    6: pynvml.NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE,
    7: pynvml.NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE,
    8: pynvml.NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE,
}


@dataclass(frozen=True)
class Placement:
    """Where a GPU instance sits: first memory slice and number of memory slices."""

    start: int
    size: int

    def mask(self) -> int:
        """The memory slices as a bit mask."""
        return ((1 << self.size) - 1) << self.start


@dataclass(frozen=True)
class GpuInstanceProfile:
    """One row of `nvidia-smi mig -lgip` plus its `-lgipp` placements."""

    enum: int  # NVML_GPU_INSTANCE_PROFILE_*: what nvmlDeviceGetGpuInstanceProfileInfo takes
    id: int  # the returned .id ("Profile ID"): what every later call takes
    name: str  # "1g.10gb"; NVML's v2 .name is "MIG " + this
    slice_count: int
    instance_count: int
    memory_size_mb: int
    multiprocessor_count: int
    copy_engine_count: int
    decoder_count: int
    encoder_count: int
    jpeg_count: int
    ofa_count: int
    placements: tuple[Placement, ...]

    @property
    def media_extension(self) -> bool:
        """Whether the instance takes the GPU's media extensions (+me)."""
        return self.enum in MEDIA_EXTENSION_ENUMS


@dataclass(frozen=True)
class ComputeInstanceProfile:
    """A compute-instance profile inside one GPU-instance profile (`-lcip`)."""

    enum: int  # NVML_COMPUTE_INSTANCE_PROFILE_*; NVML reports it back as .id
    slice_count: int
    multiprocessor_count: int
    starts: tuple[int, ...]  # compute-slice offsets inside the GPU instance

    @property
    def instance_count(self) -> int:
        """How many fit side by side."""
        return len(self.starts)


def compute_profiles(gi: GpuInstanceProfile) -> tuple[ComputeInstanceProfile, ...]:
    """The compute-instance profiles NVML offers inside a GPU instance of profile ``gi``.

    C ≤ G, and C < G only when 2C ≤ G + 1 (go-nvlib's rule; matches the A100 `-lcip` tables,
    docs/upstream-facts.md M4.3). Placements are multiples of C that fit (inferred). SMs scale
    with C.
    """
    g = gi.slice_count
    profiles = []
    for c, enum in sorted(_CI_ENUM_BY_SLICES.items()):
        if c > g or (c < g and 2 * c > g + 1):
            continue
        starts = tuple(range(0, g - c + 1, c))
        profiles.append(ComputeInstanceProfile(enum, c, gi.multiprocessor_count * c // g, starts))
    return tuple(profiles)


def mig_device_profile(gi: GpuInstanceProfile, ci_slices: int) -> str:
    """A MIG device's profile name: "3g.40gb", or "1c.3g.40gb" for a smaller compute instance."""
    return gi.name if ci_slices == gi.slice_count else f"{ci_slices}c.{gi.name}"


@dataclass(frozen=True)
class GpuModel:
    """A GPU product as NVML describes it."""

    key: str
    name: str  # nvmlDeviceGetName
    pci_device_id: int
    pci_subsystem_id: int  # believed values; replace with readings from real boards
    memory_mib: int
    cuda_compute_capability: tuple[int, int]
    # "reset-required": SetMigMode leaves the mode pending (Ampere as in clouds and passthrough);
    # "immediate": the new mode is current at once (Hopper and later). docs/upstream-facts.md M2.1.
    mig_activation: str
    mig_mode_survives_reset: bool  # Ampere keeps it; Hopper loses it on reset or reboot
    profiles: tuple[GpuInstanceProfile, ...]
    memory_reserved: int = 0  # bytes the driver keeps with nothing running (a real reading)


# The 7-compute/8-memory-slice geometry shared by A100, H100, H200 (docs/upstream-facts.md M4.2):
# (enum, nvidia-smi id, compute slices, instance cap, starts, size in memory slices)
_SEVEN_SLICE = (
    (pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, 1, 7, (0, 1, 2, 3, 4, 5, 6), 1),
    (pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, 1, 1, (0, 1, 2, 3, 4, 5, 6), 1),
    (pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, 1, 4, (0, 2, 4, 6), 2),
    (pynvml.NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, 2, 3, (0, 2, 4), 2),
    (pynvml.NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, 3, 2, (0, 4), 4),
    (pynvml.NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, 4, 1, (0,), 4),
    (pynvml.NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, 7, 1, (0,), 8),
)

# The A30's 4-slice geometry (docs/upstream-facts.md M4.2; IDs as its `-lgip` prints them).
_FOUR_SLICE = (
    (pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE, 14, 1, 4, (0, 1, 2, 3), 1),
    (pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 21, 1, 1, (0, 1, 2, 3), 1),
    (pynvml.NVML_GPU_INSTANCE_PROFILE_2_SLICE, 5, 2, 2, (0, 2), 2),
    (pynvml.NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1, 6, 2, 1, (0, 2), 2),
    (pynvml.NVML_GPU_INSTANCE_PROFILE_4_SLICE, 0, 4, 1, (0,), 4),
)

# Per board, one row per geometry row above: (name, memory MB, SMs, CE, DEC, JPEG, OFA).
_Row = tuple[str, int, int, int, int, int, int]


def _profiles(
    geometry: tuple[tuple[int, int, int, int, tuple[int, ...], int], ...], rows: tuple[_Row, ...]
) -> tuple[GpuInstanceProfile, ...]:
    profiles = []
    for (enum, pid, slices, cap, starts, size), row in zip(geometry, rows, strict=True):
        name, memory, sms, ce, dec, jpeg, ofa = row
        placements = tuple(Placement(start, size) for start in starts)
        profiles.append(
            GpuInstanceProfile(
                enum, pid, name, slices, cap, memory, sms, ce, dec, 0, jpeg, ofa, placements
            )
        )
    return tuple(profiles)


_A100_40GB = _profiles(
    _SEVEN_SLICE,
    (
        ("1g.5gb", 4864, 14, 1, 0, 0, 0),
        ("1g.5gb+me", 4864, 14, 1, 1, 1, 1),
        ("1g.10gb", 9856, 14, 1, 1, 0, 0),
        ("2g.10gb", 9856, 28, 2, 1, 0, 0),
        ("3g.20gb", 19968, 42, 3, 2, 0, 0),
        ("4g.20gb", 19968, 56, 4, 2, 0, 0),
        ("7g.40gb", 40192, 98, 7, 5, 1, 1),
    ),
)
_A100_80GB = _profiles(
    _SEVEN_SLICE,
    (
        ("1g.10gb", 9728, 14, 1, 0, 0, 0),
        ("1g.10gb+me", 9728, 14, 1, 1, 1, 1),
        ("1g.20gb", 19968, 14, 1, 1, 0, 0),  # derived from 2g.20gb and A100-40GB's 1g.10gb
        ("2g.20gb", 19968, 28, 2, 1, 0, 0),
        ("3g.40gb", 40192, 42, 3, 2, 0, 0),
        ("4g.40gb", 40192, 56, 4, 2, 0, 0),
        ("7g.80gb", 80896, 98, 7, 5, 1, 1),
    ),
)
_H100_80GB = _profiles(
    _SEVEN_SLICE,
    (
        ("1g.10gb", 9984, 16, 1, 1, 1, 0),
        ("1g.10gb+me", 9984, 16, 1, 1, 1, 1),
        ("1g.20gb", 20096, 26, 1, 1, 1, 0),
        ("2g.20gb", 20096, 32, 2, 2, 2, 0),
        ("3g.40gb", 40448, 60, 3, 3, 3, 0),
        ("4g.40gb", 40448, 64, 4, 4, 4, 0),
        ("7g.80gb", 81152, 132, 8, 7, 7, 1),
    ),
)
_H200_141GB = _profiles(
    _SEVEN_SLICE,
    (
        ("1g.18gb", 16384, 16, 1, 1, 1, 0),
        ("1g.18gb+me", 16384, 16, 1, 1, 1, 1),
        ("1g.35gb", 33280, 26, 1, 1, 1, 0),
        ("2g.35gb", 33280, 32, 2, 2, 2, 0),
        ("3g.71gb", 71424, 60, 3, 3, 3, 0),
        ("4g.71gb", 71424, 64, 4, 4, 4, 0),
        ("7g.141gb", 143360, 132, 8, 7, 7, 1),
    ),
)
# A30 memory and engine counts as the go-nvml a30 mock lists them (its placements agree with
# the guide's fractions); no public lgip reading was found.  # derived
_A30 = _profiles(
    _FOUR_SLICE,
    (
        ("1g.6gb", 5836, 14, 1, 0, 0, 0),
        ("1g.6gb+me", 5836, 14, 1, 1, 1, 1),
        ("2g.12gb", 11672, 28, 2, 2, 0, 0),
        ("2g.12gb+me", 11672, 28, 2, 2, 1, 1),
        ("4g.24gb", 23344, 56, 4, 4, 1, 1),
    ),
)

_AMPERE = ("reset-required", True)
_HOPPER = ("immediate", False)

MODELS: dict[str, GpuModel] = {
    model.key: model
    for model in (
        GpuModel("A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", 0x20B010DE, 0x134F10DE, 40960,
                 (8, 0), *_AMPERE, _A100_40GB),
        GpuModel("A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", 0x20B210DE, 0x147F10DE, 81920,
                 (8, 0), *_AMPERE, _A100_80GB),
        GpuModel("A100-PCIE-80GB", "NVIDIA A100 80GB PCIe", 0x20B510DE, 0x153310DE, 81920,
                 (8, 0), *_AMPERE, _A100_80GB),
        GpuModel("H100-SXM5-80GB", "NVIDIA H100 80GB HBM3", 0x233010DE, 0x16C110DE, 81559,
                 (9, 0), *_HOPPER, _H100_80GB),
        GpuModel("H200-SXM-141GB", "NVIDIA H200", 0x233510DE, 0x18BF10DE, 143771,
                 (9, 0), *_HOPPER, _H200_141GB, memory_reserved=644939776),
        GpuModel("A30", "NVIDIA A30", 0x20B710DE, 0x153210DE, 24576,
                 (8, 0), *_AMPERE, _A30),
        GpuModel("L4", "NVIDIA L4", 0x27B810DE, 0x16CA10DE, 23034,
                 (8, 9), "immediate", False, ()),
    )
}  # fmt: skip


def model(key: str) -> GpuModel:
    """The model called ``key`` (one of ``MODELS``), with a helpful error for typos."""
    try:
        return MODELS[key]
    except KeyError:
        raise KeyError(f"unknown GPU model {key!r}; known: {', '.join(MODELS)}") from None
