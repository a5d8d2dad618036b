"""Where a node's MIG change stands, and what the agent does next: a small pure state machine.

Owns the request key (a config name and a hash of its content, so that re-applying the same
name after a ConfigMap edit is a new request), the states the agent reports (`pending`,
`success`, `failed`, `reboot-required`), the phases it records while a change runs, and
`decide`: from the desired request, the recorded progress and what the device shows, where
the agent starts this pass. Because every pass decides from those alone, a crash or restart at
any step resumes from desired state (docs/architecture.md, "The agent"). Also the compact
layout text the agent reports per GPU. Must not read the node, NVML or the clock. Pure: standard
library only.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
from collections.abc import Iterable, Mapping, Sequence

from kubectl_gpu import keys, numbers
from kubectl_gpu.mig.state import GpuInstance, GpuState

_HASH_CHARS = 12


class State(str, enum.Enum):
    """The node's MIG state label."""

    PENDING = "pending"
    SUCCESS = "success"
    FAILED = "failed"
    REBOOT_REQUIRED = "reboot-required"


class Phase(str, enum.Enum):
    """How far the running change got (recorded so that a restart knows)."""

    VALIDATING = "validating"
    PAUSING = "pausing-plugin"
    CONFIGURING = "configuring"
    RESTORING = "restoring-plugin"
    VERIFYING = "verifying"


class Start(str, enum.Enum):
    """Where this pass starts."""

    NOTHING = "nothing"  # at rest: the node is as asked, or waits for a new request
    RESTORE = "restore"  # bring back a device plugin left paused; report nothing new
    CONFIGURE = "configure"  # validate, pause, change the GPUs, restore, verify
    VERIFY = "verify"  # the GPUs are done: restore the plugin and wait for allocatable
    ABANDON = "abandon"  # the request was withdrawn mid-change: restore, report it, stop


@dataclasses.dataclass(frozen=True)
class Record:
    """What the Node says about the last request the agent took up."""

    request: str = ""
    state: State | None = None
    phase: Phase | None = None

    @classmethod
    def from_values(cls, request: str, state: str, phase: str) -> Record:
        """From label/annotation text; unknown values read as absent."""
        known_state = {s.value: s for s in State}.get(state)
        known_phase = {p.value: p for p in Phase}.get(phase)
        return cls(request, known_state, known_phase)


@dataclasses.dataclass(frozen=True)
class Observed:
    """What this pass sees: the desired request ("" none), and the device and plugin."""

    desired: str
    matches: bool  # the GPUs already have the desired layout (the plan is empty)
    mode_waiting: bool  # some GPU's MIG mode still waits for a reset or reboot
    plugin_paused: bool
    forced: bool = False  # the request was re-applied with --force (a GPU in use may change)


def request_key(name: str, content: str) -> str:
    """`<name>@<hash of the config's content>`: a ConfigMap edit makes a new request."""
    digest = hashlib.sha256(content.encode("utf-8")).hexdigest()[:_HASH_CHARS]
    return f"{name}@{digest}"


def decide(record: Record, seen: Observed) -> Start:
    """Where to start, from the desired request, the recorded progress and the device."""
    at_rest = Start.RESTORE if seen.plugin_paused else Start.NOTHING
    if not seen.desired:
        # a change that ran (or crashed) when its label was removed must not stay pending
        return Start.ABANDON if record.state is State.PENDING else at_rest
    if record.request != seen.desired:
        return Start.VERIFY if seen.matches else Start.CONFIGURE
    if record.state is State.FAILED:
        # until the request changes or is forced: a retry loop would hide the reason
        return Start.CONFIGURE if seen.forced else at_rest
    if record.state is State.REBOOT_REQUIRED:
        return at_rest if seen.mode_waiting else Start.CONFIGURE
    if record.state is State.SUCCESS:
        return at_rest if seen.matches else Start.CONFIGURE  # e.g. instances lost at reboot
    late = record.phase in (Phase.RESTORING, Phase.VERIFYING)
    return Start.VERIFY if late and seen.matches else Start.CONFIGURE


def mode_waiting(gpus: Iterable[GpuState]) -> bool:
    """True when some GPU's MIG mode change waits for a reset or a reboot."""
    return any(g.mig_capable and g.mode_current != g.mode_pending for g in gpus)


def layout_text(gpu: GpuState) -> str:
    """One GPU's layout as reported: `3g.40gb@0 2g.20gb@4`, `MIG off`, or `MIG on, empty`."""
    if not gpu.mig_capable:
        return "not MIG-capable"
    if not gpu.mode_current:
        return "MIG off"
    if not gpu.gpu_instances:
        return "MIG on, empty"
    placed = sorted(gpu.gpu_instances, key=lambda g: g.placement_start)
    return " ".join(_instance_text(g) for g in placed)


def _instance_text(gi: GpuInstance) -> str:
    inner = [c.profile for c in gi.compute_instances if c.profile != gi.profile]
    return f"{gi.profile}@{gi.placement_start}" + (f"[{','.join(inner)}]" if inner else "")


def layouts(gpus: Iterable[GpuState]) -> dict[str, str]:
    """Every GPU's layout text, by index (as a string: it is stored as JSON)."""
    return {str(g.index): layout_text(g) for g in gpus}


def expected_resources(
    resources: Mapping[str, int],
    allocatable: Mapping[str, str],
    replicas: Mapping[str, int] | None = None,
) -> dict[str, tuple[int, int]]:
    """The resources whose allocatable differs from what the layout makes: name → (want, have).

    `replicas` is how many devices the plugin advertises per physical device of a resource
    (time-slicing or MPS in its config): the layout's count times that is what kubelet shows."""
    wanted = dict(resources)
    for name in allocatable:  # a profile the layout no longer has must show 0
        if name.startswith(keys.MIG_RESOURCE_PREFIX):
            wanted.setdefault(name, 0)
    missing = {}
    for name, want in wanted.items():
        want *= (replicas or {}).get(name, 1)
        have_text = str(allocatable.get(name, "0"))
        have = numbers.whole(have_text) or 0
        if have != want:
            missing[name] = (want, have)
    return missing


def replicas_per_device(registered: Mapping[str, Sequence[str]]) -> dict[str, int]:
    """Replicas per physical device, per resource, from the device IDs the plugin registered
    (`GPU-…::0`…`::3` are 4 replicas of one GPU); resources without replicas are left out."""
    found = {}
    for resource, ids in registered.items():
        physical = {device.split("::", 1)[0] for device in ids}
        if physical and len(ids) > len(physical) and len(ids) % len(physical) == 0:
            found[resource] = len(ids) // len(physical)
    return found
