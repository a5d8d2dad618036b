"""Whether a mig-parted config fits a node: a verdict per GPU, and the device plugin's view.

Owns `check` (one config against one target's GPUs) and `check_file` (several configs against
several targets: what `kubectl gpu mig validate` and `plan` show). Per GPU: not covered by any
spec, skipped or refused when not MIG-capable, or the layout from fit.py, for every spec that
selects it, since mig-parted applies each in turn (docs/upstream-facts.md M1.3). Per node: the
NVIDIA device plugin's MIG strategy rules and the resources it would advertise
(docs/upstream-facts.md P4), reusing its error wording. Must not read files or the cluster,
nor render. Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
import enum
from collections import Counter
from collections.abc import Sequence

from kubectl_gpu.mig import fit, nodes
from kubectl_gpu.mig.fit import Layout, MigFitError
from kubectl_gpu.mig.nodes import NodeGpu, Selection, Target
from kubectl_gpu.mig.profiles import MigProfile
from kubectl_gpu.mig.selection import ALL
from kubectl_gpu.mig.spec import MigConfigFile, MigDeviceSpec

NONE, SINGLE, MIXED = "none", "single", "mixed"
STRATEGIES = (NONE, SINGLE, MIXED)
FULL_GPU_RESOURCE = "nvidia.com/gpu"
UNKNOWN_MODEL = "unknown-model"


class Status(str, enum.Enum):
    """What happens to one GPU when the config is applied."""

    FITS = "fits"
    DOES_NOT_FIT = "does-not-fit"
    NOT_COVERED = "not-covered"  # no spec selects it
    SKIPPED = "skipped"  # not MIG-capable; mig-parted leaves it alone


@dataclasses.dataclass(frozen=True)
class GpuVerdict:
    """One GPU: its status, the spec that applies (0-based position), and the layout."""

    gpu: NodeGpu
    status: Status
    spec: int | None = None
    mig_enabled: bool | None = None
    layout: Layout = ()
    problem: str = ""

    @property
    def devices(self) -> tuple[MigProfile, ...]:
        """The MIG devices (compute instances) the layout creates."""
        return tuple(d for instance in self.layout for d in instance.compute_instances)


@dataclasses.dataclass(frozen=True)
class ConfigVerdict:
    """One config against one target: every GPU's verdict and the node-wide problems."""

    config: str
    target: Target
    gpus: tuple[GpuVerdict, ...]
    strategy: str | None = None
    problems: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        """True when every GPU fits (or is skipped) and the device plugin is satisfied."""
        good = (Status.FITS, Status.SKIPPED)
        return not self.problems and all(v.status in good for v in self.gpus)

    @property
    def resources(self) -> dict[str, int]:
        """What the device plugin advertises on the node (mixed naming when no strategy)."""
        total: Counter[str] = Counter()
        for verdict in self.gpus:
            total.update(gpu_resources(verdict, self.strategy))
        return dict(sorted(total.items()))


def check_file(
    config_file: MigConfigFile,
    names: Sequence[str],
    targets: Sequence[Target],
    strategy: str | None = None,
) -> tuple[ConfigVerdict, ...]:
    """Every named config of the file against every target, config by config."""
    return tuple(
        check(name, config_file.select(name), target, strategy)
        for name in names
        for target in targets
    )


def check(
    name: str, specs: Sequence[MigDeviceSpec], target: Target, strategy: str | None = None
) -> ConfigVerdict:
    """Config `name` (its specs) against the GPUs of `target`."""
    gpus = tuple(_gpu_verdict(selection) for selection in nodes.select(specs, target.gpus))
    problems = tuple(_absent_gpus(specs, target) + strategy_problems(gpus, strategy))
    return ConfigVerdict(name, target, gpus, strategy, problems)


def _absent_gpus(specs: Sequence[MigDeviceSpec], target: Target) -> list[str]:
    """A spec listing a GPU index the target does not have: mig-parted walks the GPUs there
    are, so that entry selects nothing, silently (docs/upstream-facts.md M1.3)."""
    present = {gpu.index for gpu in target.gpus}
    where = f"node {target.node}" if target.node else target.name
    have = ", ".join(str(i) for i in sorted(present)) or "none"
    found = []
    for position, spec in enumerate(specs):
        listed = () if spec.devices == ALL else spec.devices
        for index in sorted(set(listed) - present):
            found.append(
                f"spec #{position + 1} lists GPU {index}, which does not exist on {where} "
                f"(its GPUs: {have}): it selects nothing there; use devices: all or "
                "existing indices"
            )
    return found


def _gpu_verdict(selection: Selection) -> GpuVerdict:
    gpu = selection.gpu
    if not selection.covered:
        return GpuVerdict(
            gpu,
            Status.NOT_COVERED,
            problem="no spec selects this GPU: mig-parted leaves it as it is, and its assert "
            "(all GPUs must match) never succeeds, so the MIG manager re-applies the config "
            "each time it starts",
        )
    if not gpu.mig_capable:
        return _not_mig_capable(selection)
    layout: Layout = ()
    for position, spec in selection.specs:
        try:
            layout = _layout(gpu, spec)
        except MigFitError as e:
            return GpuVerdict(
                gpu,
                Status.DOES_NOT_FIT,
                position,
                spec.mig_enabled,
                (),
                _where(selection, position) + e.message,
            )
    position, spec = selection.specs[-1]
    return GpuVerdict(gpu, Status.FITS, position, spec.mig_enabled, layout)


def _layout(gpu: NodeGpu, spec: MigDeviceSpec) -> Layout:
    if not spec.mig_enabled:
        return ()
    if gpu.model is None:
        raise MigFitError(
            f"no MIG geometry is known for {gpu.name} ({gpu.pci_id})",
            profile="",
            reason=UNKNOWN_MODEL,
        )
    return fit.layout(gpu.model, spec.mig_devices)


def _where(selection: Selection, position: int) -> str:
    last = selection.specs[-1][0]
    if position == last:
        return ""
    return f"spec #{position + 1}, which mig-parted applies before spec #{last + 1}: "


def _not_mig_capable(selection: Selection) -> GpuVerdict:
    # mig-parted skips a non-MIG-capable GPU for `devices: all` or `mig-enabled: false`, and
    # refuses a spec that lists it and enables MIG (apply/config.go, docs/upstream-facts.md M1.3).
    gpu = selection.gpu
    for position, spec in selection.specs:
        if spec.mig_enabled and spec.devices != ALL:
            return GpuVerdict(
                gpu,
                Status.DOES_NOT_FIT,
                position,
                True,
                problem=f"spec #{position + 1}: cannot set MIG config on non MIG-capable GPU",
            )
    position, spec = selection.specs[-1]
    if not any(not s.mig_enabled for _, s in selection.specs):
        return GpuVerdict(
            gpu, Status.SKIPPED, position, None, problem="not MIG-capable: mig-parted skips it"
        )
    return GpuVerdict(gpu, Status.FITS, position, False)


def strategy_problems(gpus: Sequence[GpuVerdict], strategy: str | None) -> list[str]:
    """Why the device plugin would refuse the node's MIG layout under `strategy`."""
    considered = [v for v in gpus if v.status is Status.FITS and v.gpu.mig_capable]
    if strategy == NONE:
        return _none_problems(considered)
    if strategy == SINGLE:
        return _single_problems(considered)
    if strategy == MIXED:
        return _mixed_problems(considered)
    return []


def _none_problems(gpus: Sequence[GpuVerdict]) -> list[str]:
    # Under `none` the plugin advertises a MIG-enabled GPU whole, as nvidia.com/gpu, and
    # never its MIG devices (device_map.go): the layout would be there but unusable.
    enabled = [str(v.gpu.index) for v in gpus if v.mig_enabled]
    if not enabled:
        return []
    return [
        "the device plugin (migStrategy none) advertises no MIG devices: it would keep "
        f"offering GPU {', '.join(enabled)} whole as {FULL_GPU_RESOURCE}, which no pod can use "
        "once MIG is enabled; set the plugin's MIG strategy to mixed (or single) first"
    ]


def _single_problems(gpus: Sequence[GpuVerdict]) -> list[str]:
    prefix = "the device plugin (migStrategy single) would refuse the node: "
    found = []
    if len({v.mig_enabled for v in gpus}) > 1:
        found.append(
            prefix + "all devices on the node must be configured with the same migEnabled value"
        )
    for verdict in gpus:
        if verdict.mig_enabled and not verdict.devices:
            found.append(
                prefix + "invalid MIG configuration: at least one device with migEnabled=true "
                "was not configured correctly: "
                f"device {verdict.gpu.index} has no MIG devices configured"
            )
    kinds = sorted({d.name for v in gpus for d in v.devices})
    if len(kinds) > 1:
        found.append(
            prefix + "invalid MIG configuration: more than one MIG device type present on node "
            f"({', '.join(kinds)})"
        )
    return found


def _mixed_problems(gpus: Sequence[GpuVerdict]) -> list[str]:
    # Under `mixed` every MIG device is advertised (a compute instance smaller than its GPU
    # instance under its GPU instance's resource, MigProfile.resource_name): nothing to refuse.
    return []


def gpu_resources(verdict: GpuVerdict, strategy: str | None) -> dict[str, int]:
    """The resources the device plugin advertises for one GPU (none when not covered)."""
    if verdict.status is Status.SKIPPED:
        return {FULL_GPU_RESOURCE: 1}
    if verdict.status is not Status.FITS:
        return {}
    if not verdict.mig_enabled or strategy == NONE:
        return {FULL_GPU_RESOURCE: 1}
    if strategy == SINGLE:
        return {FULL_GPU_RESOURCE: len(verdict.devices)} if verdict.devices else {}
    counts = Counter(d.resource_name for d in verdict.devices)
    return dict(sorted(counts.items()))


def to_dict(verdict: ConfigVerdict) -> dict[str, object]:
    """One result of schemas/mig-validate-result.v1.json (`results[]`)."""
    return {
        "config": verdict.config,
        "target": verdict.target.name,
        "node": verdict.target.node,
        "fits": verdict.fits,
        "problems": list(verdict.problems),
        "resources": verdict.resources,
        "gpus": [_gpu_to_dict(v, verdict.strategy) for v in verdict.gpus],
    }


def _gpu_to_dict(verdict: GpuVerdict, strategy: str | None) -> dict[str, object]:
    gpu = verdict.gpu
    return {
        "index": gpu.index,
        "model": gpu.model.key if gpu.model else None,
        "product": gpu.name,
        "pciDeviceId": gpu.pci_id,
        "status": verdict.status.value,
        "spec": verdict.spec,
        "migEnabled": verdict.mig_enabled,
        "problem": verdict.problem or None,
        "instances": [
            {
                "profile": p.profile.name,
                "placement": {"start": p.placement.start, "size": p.placement.size},
                "computeInstances": [d.name for d in p.compute_instances],
            }
            for p in sorted(verdict.layout, key=lambda p: p.placement.start)
        ],
        "resources": gpu_resources(verdict, strategy),
    }
