"""What the device plugin advertises on one node: resource names and device IDs
(docs/upstream-facts.md P1.5, P2, P4).

Owns the upstream device map: whole GPUs as `nvidia.com/gpu`, MIG strategies none / single /
mixed with their quirks (a MIG-enabled GPU is still one `nvidia.com/gpu` under none; single
needs one MIG profile on all-MIG GPUs; mixed names `nvidia.com/mig-<profile>` with `+` → `.`
and breaks on a compute-instance sub-profile), replicated IDs `<UUID>::<r>`, renaming to
`<name>.shared`, names that match no device skipped, and MPS's refusal of MIG devices. Errors
here are the plugin failing to start. Must not read the store or the config file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tests.fakes.cluster.nodes import GpuView
from tests.fakes.cluster.pluginconfig import PluginConfig

GPU = "nvidia.com/gpu"


class PluginStartError(Exception):
    """The plugin could not build its resource managers (it exits 1 if failOnInitError)."""


@dataclass(frozen=True)
class Device:
    """One advertised device: its ID as kubelet sees it and the physical device behind it."""

    id: str  # "GPU-…", "GPU-…::2", "MIG-…", "MIG-…::0"
    physical: str  # the NVML UUID
    gpu_index: int


@dataclass(frozen=True)
class Resource:
    """One resource the plugin registers with kubelet (one gRPC socket upstream)."""

    name: str
    devices: tuple[Device, ...]
    replicas: int = 1
    fail_requests_greater_than_one: bool = False
    policy: str = "distributed"

    @property
    def shared(self) -> bool:
        return self.replicas > 1


def advertise(gpus: Sequence[GpuView], config: PluginConfig) -> dict[str, Resource]:
    """Resources and device IDs for `gpus` under `config`, or PluginStartError."""
    if not gpus:
        raise PluginStartError(
            "error starting plugins: error creating plugin manager: unable to create plugin "
            "manager: failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND"
        )
    base = _base_devices(gpus, config.mig_strategy)
    sharing = config.sharing
    if sharing.strategy == "mps" and any(d.physical.startswith("MIG-") for d in base.get(GPU, [])):
        raise PluginStartError(
            "error starting plugins: error creating plugins: sharing using MPS is not supported "
            "for MIG devices"
        )
    resources: dict[str, Resource] = {}
    for name, devices in base.items():
        wanted = sharing.replicas_of(name)
        if wanted is None:  # not shared (unmatched names are skipped: docs/upstream-facts.md P1.5)
            resources[name] = Resource(name, tuple(devices), policy=config.allocation_policy)
            continue
        replicated = tuple(
            Device(f"{d.physical}::{r}", d.physical, d.gpu_index)
            for d in devices
            for r in range(wanted.replicas)
        )
        advertised = wanted.rename or name
        resources[advertised] = Resource(
            advertised,
            replicated,
            wanted.replicas,
            sharing.fail_requests_greater_than_one,
            config.allocation_policy,
        )
    return resources


def _base_devices(gpus: Sequence[GpuView], strategy: str) -> dict[str, list[Device]]:
    if strategy == "single":
        return _single(gpus)
    found: dict[str, list[Device]] = {}
    for gpu in gpus:
        if strategy == "mixed" and gpu.mig_enabled:
            # A MIG-enabled GPU without MIG devices is only a warning under mixed (PR #806).
            for mig in gpu.mig_devices:
                found.setdefault(_mixed_name(mig.profile, mig.gi_slices, mig.ci_slices), []).append(
                    Device(mig.uuid, mig.uuid, gpu.index)
                )
        else:
            # Under none a MIG-enabled GPU is still advertised whole (device_map.go L118-124).
            found.setdefault(GPU, []).append(Device(gpu.uuid, gpu.uuid, gpu.index))
    return found


def _mixed_name(profile: str, gi_slices: int, ci_slices: int) -> str:
    if gi_slices != ci_slices:
        raise PluginStartError(
            "error starting plugins: error creating plugins: error building device map: "
            f"MIG profile '{profile}' does not match any resource patterns"
        )
    return "nvidia.com/mig-" + profile.replace("+", ".")


def _single(gpus: Sequence[GpuView]) -> dict[str, list[Device]]:
    enabled = [g for g in gpus if g.mig_enabled]
    if not enabled:
        return {GPU: [Device(g.uuid, g.uuid, g.index) for g in gpus]}
    prefix = "error starting plugins: error creating plugins: invalid MIG configuration: "
    if len(enabled) != len(gpus):
        raise PluginStartError(
            prefix + "all devices on the node must be configured with the same migEnabled value"
        )
    for gpu in enabled:
        if not gpu.mig_devices:
            raise PluginStartError(
                prefix + "at least one device with migEnabled=true was not configured "
                f"correctly: device {gpu.index} has no MIG devices configured"
            )
    profiles = {mig.profile for g in enabled for mig in g.mig_devices}
    if len(profiles) > 1:
        raise PluginStartError(prefix + "more than one MIG device type present on node")
    return {GPU: [Device(m.uuid, m.uuid, g.index) for g in enabled for m in g.mig_devices]}
