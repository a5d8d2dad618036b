"""GPU and compute instances of one MIG-mode GPU in the NVML stand-in (test code only).

Owns: which memory slices are taken, creating and destroying GPU instances (with or without a
placement) and compute instances, instance caps, remaining capacity, instance IDs and MIG UUIDs.
Every operation answers with the NVML return code the real library gives. Must not: know about
ctypes, handles, processes or MIG mode (device.py decides whether a call may reach here).

Two behaviours are inferred from public outputs rather than documented:

* **GPU instance IDs** are the driver's "swizzle IDs", a binary tree over the memory slices:
  0 is the whole GPU, 1-2 the halves, 3-6 the quarters, 7-14 the eighths. This reproduces every
  `nvidia-smi mig -lgi` listing found (e.g. 2g.20gb at 0:2 is GI 3, 1g.10gb at 2:1 is GI 9).
* **Placement without one requested** (``nvmlDeviceCreateGpuInstance``) takes the free placement
  that blocks the fewest still-possible placements of all profiles, the lowest start on a tie.
  This reproduces the layout mig-parted got for all-balanced on an 80GB board (3g at 4:4, 2g at
  0:2, 1g at 2:1 and 3:1; DCGM#138) and the MIG guide's failure: 1g, 1g, 2g first leave no room
  for a 3g ("Insufficient Resources"), while 3g first fits all four (docs/upstream-facts.md M2.2).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from tests.kit.node.libnvml import codes
from tests.kit.node.libnvml.models import (
    ComputeInstanceProfile,
    GpuInstanceProfile,
    Placement,
    compute_profiles,
)

SUCCESS = codes.SUCCESS
_UUID_NAMESPACE = uuid.UUID("6f1c3a52-5b0e-4d6c-9a51-6b7e3f3c2a10")


@dataclass(eq=False)
class ComputeInstance:
    """A compute instance; with its GPU instance it is one MIG device."""

    id: int
    profile: ComputeInstanceProfile
    start: int
    uuid: str  # the MIG device's UUID, "MIG-…"
    alive: bool = True


@dataclass(eq=False)
class GpuInstance:
    """A GPU instance at a placement, holding compute instances by ID."""

    id: int
    profile: GpuInstanceProfile
    placement: Placement
    compute_instances: dict[int, ComputeInstance] = field(default_factory=dict)
    alive: bool = True

    def ci_profile(self, enum: int) -> ComputeInstanceProfile | None:
        """The compute-instance profile ``enum`` if this GPU instance offers it."""
        return next((p for p in compute_profiles(self.profile) if p.enum == enum), None)


class MigLayout:
    """The GPU and compute instances of one GPU, over its profile table."""

    def __init__(self, profiles: tuple[GpuInstanceProfile, ...], gpu_uuid: str) -> None:
        self.profiles = profiles
        self.gpu_uuid = gpu_uuid
        self.gpu_instances: dict[int, GpuInstance] = {}
        ends = [p.start + p.size for g in profiles for p in g.placements]
        self.memory_slices = max(ends, default=0)
        self._created = 0  # feeds MIG UUIDs, so a re-created instance gets a new one

    # -- lookups -------------------------------------------------------------------------------

    def profile_by_enum(self, enum: int) -> GpuInstanceProfile | None:
        """The profile for an NVML_GPU_INSTANCE_PROFILE_* value, if this GPU has it."""
        return next((p for p in self.profiles if p.enum == enum), None)

    def profile_by_id(self, profile_id: int) -> GpuInstanceProfile | None:
        """The profile for a profile ID (the .id NVML returned), if this GPU has it."""
        return next((p for p in self.profiles if p.id == profile_id), None)

    def instances_of(self, profile: GpuInstanceProfile) -> list[GpuInstance]:
        """GPU instances of ``profile``, by ID."""
        return [gi for _, gi in sorted(self.gpu_instances.items()) if gi.profile is profile]

    def mig_devices(self) -> list[tuple[GpuInstance, ComputeInstance]]:
        """Every (GPU instance, compute instance) pair, by GPU instance ID then CI ID."""
        return [
            (gi, ci)
            for _, gi in sorted(self.gpu_instances.items())
            for _, ci in sorted(gi.compute_instances.items())
        ]

    # -- GPU instances -------------------------------------------------------------------------

    def remaining_capacity(self, profile: GpuInstanceProfile) -> int:
        """How many more instances of ``profile`` could be created now."""
        if self._media_extension_taken(profile):
            return 0
        room = self._instance_room(profile)
        taken = self._occupied()
        fitting = 0
        for placement in profile.placements:
            if not placement.mask() & taken:
                taken |= placement.mask()
                fitting += 1
        return min(room, fitting)

    def create_gpu_instance(
        self, profile: GpuInstanceProfile, placement: Placement | None
    ) -> tuple[int, GpuInstance | None]:
        """Create a GPU instance, at ``placement`` or where the driver would choose."""
        if placement is not None and placement not in profile.placements:
            return codes.INVALID_ARGUMENT, None
        if self._instance_room(profile) == 0 or self._media_extension_taken(profile):
            return codes.INSUFFICIENT_RESOURCES, None
        chosen = placement if placement is not None else self._default_placement(profile)
        if chosen is None or chosen.mask() & self._occupied():
            return codes.INSUFFICIENT_RESOURCES, None
        gi = GpuInstance(self._gpu_instance_id(chosen), profile, chosen)
        self.gpu_instances[gi.id] = gi
        return SUCCESS, gi

    def destroy_gpu_instance(self, gi: GpuInstance) -> int:
        """Destroy an empty GPU instance; IN_USE while it holds compute instances."""
        if gi.compute_instances:
            return codes.IN_USE
        gi.alive = False
        del self.gpu_instances[gi.id]
        return SUCCESS

    # -- compute instances ---------------------------------------------------------------------

    def ci_remaining_capacity(self, gi: GpuInstance, profile: ComputeInstanceProfile) -> int:
        """How many more compute instances of ``profile`` fit in ``gi``."""
        taken = _ci_occupied(gi)
        fitting = 0
        for start in profile.starts:
            mask = _ci_mask(start, profile.slice_count)
            if not mask & taken:
                taken |= mask
                fitting += 1
        return fitting

    def create_compute_instance(
        self, gi: GpuInstance, profile: ComputeInstanceProfile, start: int | None
    ) -> tuple[int, ComputeInstance | None]:
        """Create a compute instance at ``start`` or the first free compute slice offset."""
        if start is not None and start not in profile.starts:
            return codes.INVALID_ARGUMENT, None
        taken = _ci_occupied(gi)
        free = [s for s in profile.starts if not _ci_mask(s, profile.slice_count) & taken]
        chosen = start if start is not None else (free[0] if free else None)
        if chosen is None or chosen not in free:
            return codes.INSUFFICIENT_RESOURCES, None
        ci_id = min(set(range(len(gi.compute_instances) + 1)) - set(gi.compute_instances))
        self._created += 1
        name = f"{self.gpu_uuid}/{gi.id}/{ci_id}/{self._created}"
        ci = ComputeInstance(ci_id, profile, chosen, f"MIG-{uuid.uuid5(_UUID_NAMESPACE, name)}")
        gi.compute_instances[ci_id] = ci
        return SUCCESS, ci

    def destroy_compute_instance(self, gi: GpuInstance, ci: ComputeInstance) -> int:
        """Destroy a compute instance (the caller has checked for processes)."""
        ci.alive = False
        del gi.compute_instances[ci.id]
        return SUCCESS

    def clear(self) -> None:
        """Drop every instance, as a GPU reset does; their handles become invalid."""
        for gi in self.gpu_instances.values():
            for ci in gi.compute_instances.values():
                ci.alive = False
            gi.alive = False
        self.gpu_instances.clear()

    # -- internals -----------------------------------------------------------------------------

    def _occupied(self) -> int:
        mask = 0
        for gi in self.gpu_instances.values():
            mask |= gi.placement.mask()
        return mask

    def _instance_room(self, profile: GpuInstanceProfile) -> int:
        return max(0, profile.instance_count - len(self.instances_of(profile)))

    def _media_extension_taken(self, profile: GpuInstanceProfile) -> bool:
        return profile.media_extension and any(
            gi.profile.media_extension for gi in self.gpu_instances.values()
        )

    def _default_placement(self, profile: GpuInstanceProfile) -> Placement | None:
        taken = self._occupied()
        free = [p for p in profile.placements if not p.mask() & taken]
        if not free:
            return None
        still_possible = [
            p.mask() for g in self.profiles for p in g.placements if not p.mask() & taken
        ]
        return min(
            free,
            key=lambda p: (sum(1 for m in still_possible if m & p.mask()), p.start),
        )

    def _gpu_instance_id(self, placement: Placement) -> int:
        slices = self.memory_slices
        if slices and not slices & (slices - 1) and slices % placement.size == 0:
            swizzle = slices // placement.size - 1 + placement.start // placement.size
            if swizzle not in self.gpu_instances:
                return swizzle
        return min(set(range(1, len(self.gpu_instances) + 2)) - set(self.gpu_instances))

    def snapshot(self) -> list[dict[str, object]]:
        """GPU instances with their compute instances, as plain data."""
        return [
            {
                "id": gi.id,
                "profile_id": gi.profile.id,
                "profile": gi.profile.name,
                "placement": {"start": gi.placement.start, "size": gi.placement.size},
                "compute_instances": [
                    {
                        "id": ci.id,
                        "profile_id": ci.profile.enum,
                        "slices": ci.profile.slice_count,
                        "start": ci.start,
                        "uuid": ci.uuid,
                    }
                    for _, ci in sorted(gi.compute_instances.items())
                ],
            }
            for _, gi in sorted(self.gpu_instances.items())
        ]


def _ci_mask(start: int, slices: int) -> int:
    return ((1 << slices) - 1) << start


def _ci_occupied(gi: GpuInstance) -> int:
    mask = 0
    for ci in gi.compute_instances.values():
        mask |= _ci_mask(ci.start, ci.profile.slice_count)
    return mask
