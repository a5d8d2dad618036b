"""The names NVIDIA's DRA driver gives the MIG devices it publishes.

dra-driver-nvidia-gpu (v0.4.1: `MigSpecTuple.ToCanonicalName`) names a MIG device
`gpu-<parent minor>-mig-<profile, dots dropped>-<GPU-instance profile ID>-<placement start>`,
e.g. `gpu-0-mig-1g10gb-19-3`, and parses its own names back the same way at prepare. A MIG
device its DynamicMIG mode publishes does not exist until a claim for it is prepared, so its
slice carries no `uuid`; the name (parent, profile, placement) is what identifies the MIG
device NVML then shows (docs/upstream-facts.md N5.2). Owns parsing that name. Must not read
anything. Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
import re

_CANONICAL = re.compile(
    r"^gpu-(?P<minor>\d{1,4})-mig-(?P<profile>[a-z0-9-]{1,40}?)-(?P<id>\d{1,4})-(?P<start>\d{1,2})$"
)


@dataclasses.dataclass(frozen=True)
class MigDeviceName:
    """What a canonical MIG device name says: the parent GPU's minor, the GPU-instance profile
    ID and where the GPU instance starts, in memory slices."""

    parent_minor: int
    profile_id: int
    placement_start: int


def parse_mig(name: str) -> MigDeviceName | None:
    """`gpu-0-mig-1g10gb-19-3` → MigDeviceName(0, 19, 3); None for any other name."""
    found = _CANONICAL.match(name)
    if found is None:
        return None
    return MigDeviceName(int(found["minor"]), int(found["id"]), int(found["start"]))
