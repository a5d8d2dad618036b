"""Fitting one spec's MIG devices onto one GPU model, with explicit placements.

Owns turning `mig-devices` into the GPU instances mig-parted would create (compute-instance
profiles of one GPU instance share it, docs/upstream-facts.md M2.2 and M4.3), the checks NVML would
make (the profile exists on the model, instance caps, a single media-extension instance,
docs/upstream-facts.md M4.1), and a search over memory-slice bit masks for placements that do not
overlap: largest instance first, backtracking, memoised on (instance, slices taken). A layout that
fits here can be created with `nvmlDeviceCreateGpuInstanceWithPlacement` in the order returned.
Must not know which spec applies to which GPU (nodes.py). Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from collections.abc import Iterable, Sequence

from kubectl_gpu.errors import GpuError
from kubectl_gpu.mig import geometry
from kubectl_gpu.mig.geometry import Placement
from kubectl_gpu.mig.models import GiProfile, GpuModel
from kubectl_gpu.mig.profiles import MigProfile

UNKNOWN_PROFILE = "unknown-profile"
TOO_MANY = "too-many"
MEDIA_EXTENSIONS = "media-extensions"
NO_PLACEMENT = "no-placement"


class MigFitError(GpuError):
    """A MIG layout does not fit a GPU model; `profile` names the instance that does not fit
    and `reason` says why (one of the constants above)."""

    def __init__(self, message: str, *, profile: str, reason: str, hint: str = "") -> None:
        super().__init__(message, hint=hint)
        self.profile = profile
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class GiRequest:
    """A GPU instance to create and the MIG devices (compute instances) inside it."""

    profile: GiProfile
    compute_instances: tuple[MigProfile, ...]


@dataclasses.dataclass(frozen=True)
class PlacedInstance:
    """A GPU instance at its placement, with its compute instances (largest first)."""

    profile: GiProfile
    placement: Placement
    compute_instances: tuple[MigProfile, ...]

    def __str__(self) -> str:
        return f"{self.profile.name}@{self.placement}"


Layout = tuple[PlacedInstance, ...]
MigDevices = Sequence[tuple[MigProfile, int]]


def layout(model: GpuModel, mig_devices: MigDevices) -> Layout:
    """Where each GPU instance of `mig_devices` goes on `model`; raises MigFitError."""
    return place(model, requests(model, mig_devices))


def requests(model: GpuModel, mig_devices: MigDevices) -> tuple[GiRequest, ...]:
    """The GPU instances `mig_devices` asks for on `model`, checked against its profiles,
    caps and single media-extension set; raises MigFitError."""
    flat = [
        (_resolve(model, device), device) for device, count in mig_devices for _ in range(count)
    ]
    # mig-parted's Flatten(): G descending, then C descending, profiles with attributes first.
    flat.sort(
        key=lambda pair: (-pair[1].gpu_slices, -pair[1].compute_slices, not _has_attr(pair[1]))
    )
    wanted = _share_gpu_instances(flat)
    _check_caps(model, wanted)
    _check_media_extensions(model, wanted)
    return wanted


def place(model: GpuModel, wanted: Sequence[GiRequest], taken: int = 0) -> Layout:
    """Placements for `wanted` on `model` that avoid each other and the slices in `taken`.

    Largest first (as the MIG guide advises creating them); raises MigFitError naming the
    first instance no arrangement could place.
    """
    ordered = sorted(wanted, key=_largest_first)
    options = tuple(r.profile.placements for r in ordered)
    found, best = _search(options, taken)
    if found is None:
        raise _no_placement(model, ordered, best, taken)
    return tuple(
        PlacedInstance(r.profile, p, r.compute_instances)
        for r, p in zip(ordered, found, strict=True)
    )


def _largest_first(wanted: GiRequest) -> tuple[int, int, str]:
    shape = wanted.profile.shape
    return -shape.memory_slices, -shape.compute_slices, wanted.profile.name


def _has_attr(profile: MigProfile) -> bool:
    return bool(profile.attributes or profile.negative_attributes)


def _resolve(model: GpuModel, device: MigProfile) -> GiProfile:
    found = model.profile(device.gpu_instance.name if device.is_compute_instance else device.name)
    if found is not None:
        return found
    inside = (
        f": it has no {device.gpu_instance.name} GPU instance" if device.is_compute_instance else ""
    )
    raise MigFitError(
        f"profile {device.name} does not exist on {model.name}{inside} "
        f"(its profiles: {', '.join(model.profile_names)})",
        profile=device.name,
        reason=UNKNOWN_PROFILE,
        hint=f"kubectl gpu mig profiles --gpu {model.key} lists them; a config written for "
        "another GPU model needs a device-filter so that it applies only there",
    )


def _share_gpu_instances(flat: list[tuple[GiProfile, MigProfile]]) -> tuple[GiRequest, ...]:
    # mig-parted adds a compute instance to the GPU instance it created last when that has the
    # same profile and room left (docs/upstream-facts.md M2.2 step 4); room is counted in
    # compute slices (inferred).
    groups: list[tuple[GiProfile, list[MigProfile]]] = []
    for profile, device in flat:
        if groups and groups[-1][0] == profile:
            used = sum(d.compute_slices for d in groups[-1][1])
            if used + device.compute_slices <= profile.compute_slices:
                groups[-1][1].append(device)
                continue
        groups.append((profile, [device]))
    return tuple(GiRequest(profile, tuple(devices)) for profile, devices in groups)


def _check_caps(model: GpuModel, wanted: Sequence[GiRequest]) -> None:
    counts = Counter(r.profile for r in wanted)
    for profile, count in counts.items():
        if count > profile.max_instances:
            raise MigFitError(
                f"{model.name} allows at most {profile.max_instances} {profile.name} GPU "
                f"instance(s) per GPU, and this spec needs {count}",
                profile=profile.name,
                reason=TOO_MANY,
                hint=f"ask for at most {profile.max_instances} {profile.name}",
            )


def _check_media_extensions(model: GpuModel, wanted: Sequence[GiRequest]) -> None:
    with_me = [r.profile.name for r in wanted if r.profile.media_extensions]
    if len(with_me) > 1:
        raise MigFitError(
            f"{model.name} has one set of media extensions, so at most one GPU instance with "
            f"them per GPU, and this spec asks for {len(with_me)} ({', '.join(with_me)})",
            profile=with_me[1],
            reason=MEDIA_EXTENSIONS,
            hint="keep one +me instance and use the plain profile for the others",
        )


Options = tuple[tuple[Placement, ...], ...]


@functools.lru_cache(maxsize=4096)
def _search(
    options: Options, taken: int
) -> tuple[tuple[Placement, ...] | None, tuple[Placement, ...]]:
    """A placement per option list that overlaps nothing, or (None, the longest partial one)."""
    failed: set[tuple[int, int]] = set()
    chosen: list[Placement] = []
    best: list[Placement] = []

    def visit(index: int, used: int) -> bool:
        if len(chosen) > len(best):
            best[:] = chosen
        if index == len(options):
            return True
        if (index, used) in failed:
            return False
        for placement in options[index]:
            if not used & placement.mask:
                chosen.append(placement)
                if visit(index + 1, used | placement.mask):
                    return True
                chosen.pop()
        failed.add((index, used))
        return False

    if visit(0, taken):
        return tuple(chosen), tuple(chosen)
    return None, tuple(best)


def _no_placement(
    model: GpuModel, ordered: Sequence[GiRequest], best: Sequence[Placement], taken: int
) -> MigFitError:
    stuck = ordered[len(best)].profile
    placed = [f"{r.profile.name}@{p}" for r, p in zip(ordered, best, strict=False)]
    used = geometry.mask(best) | taken
    free = [i for i in range(model.board.memory_slices) if not used >> i & 1]
    before = f"with {_and(placed)} placed" if placed else "on an empty GPU"
    left = f"memory slices {_and(map(str, free))} are free" if free else "no memory slice is free"
    needed = sum(r.profile.shape.memory_slices for r in ordered) + bin(taken).count("1")
    total = model.board.memory_slices
    over = f"; the layout asks for {needed} of {total} memory slices" if needed > total else ""
    return MigFitError(
        f"no free placement for {stuck.name} on {model.name}: {before}, {left}, and "
        f"{stuck.name} needs one of {stuck.shape}{over}",
        profile=stuck.name,
        reason=NO_PLACEMENT,
        hint="drop or shrink an instance; kubectl gpu mig profiles lists each profile's placements",
    )


def _and(items: Iterable[str]) -> str:
    words = list(items)
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)
