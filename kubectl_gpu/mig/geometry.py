"""MIG placement arithmetic: memory-slice placements, their bit masks, and the two boards.

Owns `Placement` (a start and a size in memory slices, as NVML's
`nvmlGpuInstancePlacement_t`), `Shape` (which placements and how many instances one class of
GPU-instance profile allows) and `Board` (the shapes of a 7-compute/8-memory-slice or a
4-compute/4-memory-slice GPU). The facts are docs/upstream-facts.md M4.1-M4.2: the MIG guide's
`nvidia-smi mig -lgipp` table for the A100-40GB, shared by every 7-slice board, and the A30's
4-slice table. A GPU instance occupies the memory slices of its placement, and creating one
fails if they overlap slices already taken, so the state of a GPU is one bit mask.
Must not know GPU models or profile names (models.py) nor search for a fit (fit.py).
Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable


@dataclasses.dataclass(frozen=True, order=True)
class Placement:
    """Where a GPU instance sits: its first memory slice and how many it spans."""

    start: int
    size: int

    @property
    def mask(self) -> int:
        """The memory slices as a bit mask (bit i = memory slice i)."""
        return ((1 << self.size) - 1) << self.start

    @property
    def slices(self) -> range:
        """The memory slices, in order."""
        return range(self.start, self.start + self.size)

    def __str__(self) -> str:
        return f"{self.start}:{self.size}"


@dataclasses.dataclass(frozen=True)
class Shape:
    """The geometry of one class of GPU-instance profile (e.g. every `2g` on a 7-slice board).

    `memory_slices` is the placement size; `starts` are the memory slices a placement may
    begin at; `max_instances` is NVML's instanceCount for the profile.
    """

    compute_slices: int
    memory_slices: int
    max_instances: int
    starts: tuple[int, ...]

    @property
    def placements(self) -> tuple[Placement, ...]:
        """Every placement this shape allows, lowest start first."""
        return tuple(Placement(start, self.memory_slices) for start in self.starts)

    def with_max(self, max_instances: int) -> Shape:
        """The same placements with another instance cap (e.g. a `+me` variant's 1)."""
        return dataclasses.replace(self, max_instances=max_instances)

    def __str__(self) -> str:
        """Placements as `nvidia-smi mig -lgipp` prints them, e.g. `{0,2,4}:2`."""
        return "{" + ",".join(map(str, self.starts)) + "}:" + str(self.memory_slices)


@dataclasses.dataclass(frozen=True)
class Board:
    """The slice layout of a MIG-capable GPU and the shapes its profiles come in."""

    compute_slices: int
    memory_slices: int
    shapes: tuple[tuple[str, Shape], ...]  # (class, shape): "2g", "1g+me", "1g-double", …

    def shape(self, name: str) -> Shape:
        """The shape of profile class `name` (KeyError when the board has none)."""
        for known, shape in self.shapes:
            if known == name:
                return shape
        raise KeyError(name)


def _board(compute: int, memory: int, shapes: dict[str, Shape]) -> Board:
    return Board(compute, memory, tuple(shapes.items()))


# docs/upstream-facts.md M4.2, "Shared geometry for 7-slice boards" (nvidia-smi IDs
# 19/20/15/14/9/5/0). The 3g shape spans 4 memory slices, not 3: the go-nvml mocks get this wrong
# (docs/upstream-facts.md M4.1).
SEVEN_SLICE = _board(
    7,
    8,
    {
        "1g": Shape(1, 1, 7, (0, 1, 2, 3, 4, 5, 6)),
        "1g+me": Shape(1, 1, 1, (0, 1, 2, 3, 4, 5, 6)),
        "1g-double": Shape(1, 2, 4, (0, 2, 4, 6)),  # 1g with two memory slices (1_SLICE_REV2)
        "2g": Shape(2, 2, 3, (0, 2, 4)),
        "3g": Shape(3, 4, 2, (0, 4)),
        "4g": Shape(4, 4, 1, (0,)),
        "7g": Shape(7, 8, 1, (0,)),
    },
)

# docs/upstream-facts.md M4.2, A30-24GB: 4 compute and 4 memory slices.
FOUR_SLICE = _board(
    4,
    4,
    {
        "1g": Shape(1, 1, 4, (0, 1, 2, 3)),
        "1g+me": Shape(1, 1, 1, (0, 1, 2, 3)),
        "2g": Shape(2, 2, 2, (0, 2)),
        "2g+me": Shape(2, 2, 1, (0, 2)),
        "4g": Shape(4, 4, 1, (0,)),
    },
)


def mask(placements: Iterable[Placement]) -> int:
    """The memory slices taken by these placements together."""
    taken = 0
    for placement in placements:
        taken |= placement.mask
    return taken
