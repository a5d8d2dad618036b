"""MIG-capable GPU models: their PCI device IDs, NVML product names and GPU-instance profiles.

Owns the per-model tables (docs/upstream-facts.md M3.5 for the PCI IDs NVIDIA's default config
groups, docs/upstream-facts.md M4.2 for the profile names, caps and shapes) and finding a model from
what a user or a node says about it: a model key (`H100-80GB`), an NVML product name (`NVIDIA H100
80GB HBM3`), GPU Feature Discovery's `nvidia.com/gpu.product` value (the same with spaces as `-`) or
a PCI device ID (`0x233010DE`). Product names are those of the NVIDIA driver README's supported-GPU
list; an ID whose name is not known there is kept with an empty name (match it by ID). What is
not verified is marked: placements of the RTX PRO 6000, and names taken only from NVIDIA's
default config. Must not search for placements (fit.py). Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools

from kubectl_gpu.errors import UsageError
from kubectl_gpu.mig import profiles
from kubectl_gpu.mig.geometry import FOUR_SLICE, SEVEN_SLICE, Board, Placement, Shape


class UnknownGpuModelError(UsageError):
    """A GPU model named on the command line is not one kubectl gpu knows."""


@dataclasses.dataclass(frozen=True)
class Product:
    """One product of a model: its PCI device+vendor ID and NVML name ("" when not known)."""

    pci_device_id: int
    name: str

    @property
    def pci_id(self) -> str:
        """The ID as mig-parted's device-filter writes it, e.g. `0x233010DE`."""
        return f"0x{self.pci_device_id:08X}"

    @property
    def label(self) -> str:
        """GPU Feature Discovery's `nvidia.com/gpu.product` value for it."""
        return self.name.replace(" ", "-")


@dataclasses.dataclass(frozen=True)
class GiProfile:
    """A GPU-instance profile of one model: its name, shape, and whether it takes the media
    extensions (the GPU's single set of JPEG/OFA engines: at most one such instance)."""

    name: str
    shape: Shape
    media_extensions: bool = False

    @property
    def compute_slices(self) -> int:
        """Compute slices (the `G` of `Gg.XXgb`)."""
        return self.shape.compute_slices

    @property
    def max_instances(self) -> int:
        """NVML's instanceCount: how many may exist on one GPU."""
        return self.shape.max_instances

    @property
    def placements(self) -> tuple[Placement, ...]:
        """Where an instance of it may sit."""
        return self.shape.placements

    @property
    def compute_instance_profiles(self) -> tuple[str, ...]:
        """The smaller compute-instance profiles inside it, e.g. `1c.3g.40gb`, `2c.3g.40gb`
        (docs/upstream-facts.md M4.3); the full one is the profile itself."""
        whole = profiles.parse(self.name)
        sizes = profiles.COMPUTE_SLICES_BY_GPU_SLICES[whole.gpu_slices]
        return tuple(
            dataclasses.replace(whole, compute_slices=c).name
            for c in sorted(sizes)
            if c < whole.gpu_slices
        )


@dataclasses.dataclass(frozen=True)
class GpuModel:
    """A MIG-capable GPU model and its GPU-instance profiles."""

    key: str
    products: tuple[Product, ...]
    board: Board
    profiles: tuple[GiProfile, ...]
    placements_verified: bool = True
    note: str = ""

    @property
    def name(self) -> str:
        """The first product's NVML name, for messages."""
        return self.products[0].name or self.key

    def profile(self, name: str) -> GiProfile | None:
        """The GPU-instance profile called `name` (e.g. `1g.10gb+me`), if this model has it."""
        return self._by_name.get(name)

    @functools.cached_property
    def _by_name(self) -> dict[str, GiProfile]:
        return {p.name: p for p in self.profiles}

    @property
    def profile_names(self) -> tuple[str, ...]:
        """Every GPU-instance profile name, in table order."""
        return tuple(p.name for p in self.profiles)


def _seven(
    one: int, double: int, half: int, full: int, *, me: bool = True
) -> tuple[GiProfile, ...]:
    """The seven-slice table from the GB in each name (docs/upstream-facts.md M4.2: 1g / 1g+me / 1g
    double-memory / 2g / 3g / 4g / 7g; 2g has the double-memory 1g's memory, 4g the 3g's)."""
    s = SEVEN_SLICE
    rows = [
        GiProfile(f"1g.{one}gb", s.shape("1g")),
        GiProfile(f"1g.{one}gb+me", s.shape("1g+me"), media_extensions=True) if me else None,
        GiProfile(f"1g.{double}gb", s.shape("1g-double")),
        GiProfile(f"2g.{double}gb", s.shape("2g")),
        GiProfile(f"3g.{half}gb", s.shape("3g")),
        GiProfile(f"4g.{half}gb", s.shape("4g")),
        GiProfile(f"7g.{full}gb", s.shape("7g")),
    ]
    return tuple(row for row in rows if row is not None)


_F = FOUR_SLICE
_A30 = (
    GiProfile("1g.6gb", _F.shape("1g")),
    GiProfile("1g.6gb+me", _F.shape("1g+me"), media_extensions=True),
    GiProfile("2g.12gb", _F.shape("2g")),
    GiProfile(
        "2g.12gb+me", _F.shape("2g+me"), media_extensions=True
    ),  # R525+; exclusive with 1g+me
    GiProfile("4g.24gb", _F.shape("4g")),
)
# docs/upstream-facts.md M4.2: names and caps from NVIDIA's default config and the operator issue;
# placements are presumed to be the A30's (4 memory slices), which nothing public confirms.
_RTX_PRO_6000 = (
    GiProfile("1g.24gb", _F.shape("1g")),
    GiProfile("1g.24gb+me", _F.shape("1g+me"), media_extensions=True),
    GiProfile("1g.24gb+gfx", _F.shape("1g")),
    GiProfile("1g.24gb+me.all", _F.shape("1g+me"), media_extensions=True),
    GiProfile("1g.24gb-me", _F.shape("1g")),
    GiProfile("2g.48gb", _F.shape("2g")),
    GiProfile("2g.48gb+gfx", _F.shape("2g")),
    GiProfile("2g.48gb+me.all", _F.shape("2g").with_max(1), media_extensions=True),
    GiProfile("2g.48gb-me", _F.shape("2g")),
    GiProfile("4g.96gb", _F.shape("4g")),
    GiProfile("4g.96gb+gfx", _F.shape("4g")),
)

_NAMES_FROM_DEFAULT_CONFIG = (
    "profile names from NVIDIA's default MIG config only (not cross-checked with the MIG guide)"
)


def _products(*pairs: tuple[int, str]) -> tuple[Product, ...]:
    return tuple(Product(device_id, name) for device_id, name in pairs)


MODELS: tuple[GpuModel, ...] = (
    GpuModel("A100-40GB", _products(
        (0x20B010DE, "NVIDIA A100-SXM4-40GB"), (0x20F110DE, "NVIDIA A100-PCIE-40GB"),
        (0x20B110DE, ""), (0x20F610DE, "NVIDIA A800 40GB Active"),
    ), SEVEN_SLICE, _seven(5, 10, 20, 40)),
    GpuModel("A100-80GB", _products(
        (0x20B210DE, "NVIDIA A100-SXM4-80GB"), (0x20B510DE, "NVIDIA A100 80GB PCIe"),
        (0x20F310DE, "NVIDIA A800-SXM4-80GB"), (0x20F510DE, "NVIDIA A800 80GB PCIe"),
    ), SEVEN_SLICE, _seven(10, 20, 40, 80)),
    GpuModel("H100-80GB", _products(
        (0x233010DE, "NVIDIA H100 80GB HBM3"), (0x233110DE, "NVIDIA H100 PCIe"),
        (0x232410DE, "NVIDIA H800"), (0x232210DE, "NVIDIA H800 PCIe"),
    ), SEVEN_SLICE, _seven(10, 20, 40, 80)),
    GpuModel("H100-94GB", _products(
        (0x232110DE, "NVIDIA H100 NVL"), (0x233A10DE, "NVIDIA H800 NVL"),
    ), SEVEN_SLICE, _seven(12, 24, 47, 94), note=_NAMES_FROM_DEFAULT_CONFIG),
    GpuModel("H100-96GB", _products(
        (0x233D10DE, ""), (0x234210DE, "NVIDIA GH200 480GB"), (0x234210DE, "NVIDIA GH200 120GB"),
        (0x232910DE, "NVIDIA H20"), (0x20B610DE, "NVIDIA PG506-232"),
    ), SEVEN_SLICE, _seven(12, 24, 48, 96, me=False),
        note="no +me profile is listed for it; the PCI IDs are grouped as NVIDIA's default "
        "config groups them"),
    GpuModel("H200-141GB", _products(
        (0x233510DE, "NVIDIA H200"), (0x233B10DE, "NVIDIA H200 NVL"),
    ), SEVEN_SLICE, _seven(18, 35, 71, 141)),
    GpuModel("GH200-144GB", _products(
        (0x234810DE, "NVIDIA GH200 144G HBM3e"),
    ), SEVEN_SLICE, _seven(18, 36, 72, 144), note=_NAMES_FROM_DEFAULT_CONFIG),
    GpuModel("B200", _products(
        (0x290110DE, "NVIDIA B200"),
    ), SEVEN_SLICE, _seven(23, 45, 90, 180)),
    GpuModel("GB200", _products(
        (0x294110DE, "NVIDIA GB200"),
    ), SEVEN_SLICE, _seven(23, 47, 93, 186)),
    GpuModel("B300", _products(
        (0x318210DE, "NVIDIA B300 SXM6 AC"),
    ), SEVEN_SLICE, _seven(34, 67, 135, 269), note=_NAMES_FROM_DEFAULT_CONFIG),
    GpuModel("GB300", _products(
        (0x31C210DE, "NVIDIA GB300"),
    ), SEVEN_SLICE, _seven(35, 70, 139, 278), note=_NAMES_FROM_DEFAULT_CONFIG),
    GpuModel("A30", _products(
        (0x20B710DE, "NVIDIA A30"),
    ), FOUR_SLICE, _A30),
    GpuModel("RTX-PRO-6000", _products(
        (0x2BB510DE, "NVIDIA RTX PRO 6000 Blackwell Server Edition"),
    ), FOUR_SLICE, _RTX_PRO_6000, placements_verified=False,
        note="placements unverified (marked ?): presumed to be the A30's (4 memory slices)"),
)  # fmt: skip


def to_dict(model: GpuModel) -> dict[str, object]:
    """One model as `kubectl gpu mig profiles -o json` prints it (`models[]`)."""
    return {
        "model": model.key,
        "products": [{"name": p.name, "pciDeviceId": p.pci_id} for p in model.products],
        "computeSlices": model.board.compute_slices,
        "memorySlices": model.board.memory_slices,
        "placementsVerified": model.placements_verified,
        "note": model.note,
        "profiles": [
            {
                "name": p.name,
                "computeSlices": p.compute_slices,
                "memorySlices": p.shape.memory_slices,
                "maxInstances": p.max_instances,
                "placements": [{"start": x.start, "size": x.size} for x in p.placements],
                "mediaExtensions": p.media_extensions,
                "computeInstanceProfiles": list(p.compute_instance_profiles),
            }
            for p in model.profiles
        ],
    }


def needs_reset_for_mode_change(pci_device_id: int) -> bool:
    """True when a MIG mode change waits for a GPU reset: GA100 boards (A100, A30, A800,
    PG506; device IDs 0x20xx). Hopper and later switch at once (docs/upstream-facts.md M2.1)."""
    return pci_device_id >> 24 == 0x20


def find(text: str) -> tuple[GpuModel, Product]:
    """The model and product `text` names: a model key, an NVML product name, a GFD
    `nvidia.com/gpu.product` value or a PCI device ID (`0x233010DE` or `0x2330`).

    Raises UnknownGpuModelError (a usage error) that lists the known models.
    """
    found = lookup(text)
    if found is None:
        raise UnknownGpuModelError(f"unknown GPU model '{text}'", hint=_known_hint(text))
    return found


def lookup(text: str) -> tuple[GpuModel, Product] | None:
    """Like `find`, but None when nothing matches."""
    return _index().get(_normal(text))


def by_pci_id(pci_device_id: int) -> tuple[GpuModel, Product] | None:
    """The model with this PCI device+vendor ID, if any."""
    return _index().get(_normal(f"0x{pci_device_id:08x}"))


def _normal(text: str) -> str:
    return text.strip().casefold()


@functools.cache
def _index() -> dict[str, tuple[GpuModel, Product]]:
    index: dict[str, tuple[GpuModel, Product]] = {}
    for model in MODELS:
        index.setdefault(_normal(model.key), (model, model.products[0]))
        for product in model.products:
            names = [product.pci_id, f"0x{product.pci_device_id >> 16:04x}"]
            if product.name:
                names += [product.name, product.label]
            for name in names:
                index.setdefault(_normal(name), (model, product))
    return index


def _known_hint(text: str) -> str:
    spellings = {_normal(s): s for m in MODELS for s in (m.key, *(p.name for p in m.products)) if s}
    wanted = _normal(text)
    close = [m.key for m in MODELS if wanted and wanted in _normal(m.key)] or [
        spellings[n] for n in difflib.get_close_matches(wanted, list(spellings), n=1, cutoff=0.6)
    ]
    guess = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    known = "; ".join(
        f"{m.key} ({', '.join(p.name or p.pci_id for p in m.products)})" for m in MODELS
    )
    return (
        f"{guess}give a model, an NVML product name, its nvidia.com/gpu.product label or a "
        f"PCI device ID such as 0x233010DE. Known: {known}"
    )
