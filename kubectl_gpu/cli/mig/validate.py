"""`kubectl gpu mig validate` and `mig plan`: whether a mig-parted config fits, and its layout.

Both read a mig-parted config, build the targets (GPU models named with --gpu, or with --node
each node's GPUs and MIG strategy read as `mig apply` reads them: the agent's report, else GPU
Feature Discovery labels; the strategy of the device plugin serving the node,
workflows.mig.strategy), hand both to `verdicts` and render the verdicts: `validate` as one
line per config, target and GPU, `plan` as a drawing of each GPU's memory slices. `-o
json|yaml` print the document `schemas/mig-validate-result.v1.json` describes. The kubernetes
client is imported only for --node, inside the function.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from kubectl_gpu.cli import inputs, render
from kubectl_gpu.cli.render import Column
from kubectl_gpu.cli.settings import Settings, global_options, pass_settings
from kubectl_gpu.errors import ExitCode, GpuError, UsageError

if TYPE_CHECKING:  # the MIG domain is imported when a command runs: `--help` lists this group
    from kubectl_gpu.mig.fit import Layout, PlacedInstance
    from kubectl_gpu.mig.nodes import Target
    from kubectl_gpu.mig.spec import MigConfigFile
    from kubectl_gpu.mig.verdicts import ConfigVerdict, GpuVerdict

F = TypeVar("F", bound=Callable[..., Any])
STRATEGIES = ("none", "single", "mixed")  # verdicts.STRATEGIES (a test keeps the two equal)
FITS, DOES_NOT_FIT = "fits", "does-not-fit"  # verdicts.Status values
_SLICE_WIDTH = 8


_TARGET_OPTIONS = (
    click.option("-f", "--filename", required=True, metavar="FILE", help="Config; - is stdin."),
    click.option("-c", "--config", "config_names", multiple=True, metavar="NAME",
                 help="Config name in the file; repeatable."),
    click.option("--gpu", "gpus", multiple=True, metavar="MODEL",
                 help="A node of this GPU model (key, NVML product name, "
                 "nvidia.com/gpu.product value or PCI device ID); repeatable, one node each."),
    click.option("--count", type=click.IntRange(min=1), default=1, show_default=True,
                 help="GPUs per --gpu node."),
    click.option("--node", "node_names", multiple=True, metavar="NODE",
                 help="A cluster node: its GPUs from the agent's report or GPU Feature "
                 "Discovery labels, its MIG strategy from the device plugin serving it; "
                 "repeatable."),
    click.option("--strategy", type=click.Choice(STRATEGIES),
                 help="Also check the device plugin's MIG strategy."),
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class CheckRequest:
    """The flags of `mig validate` and `mig plan` (the global ones are in `Settings`), checked
    once as they are made: GPU models or cluster nodes, not both; --count with --gpu only."""

    filename: str
    config_names: tuple[str, ...]
    gpus: tuple[str, ...]
    count: int
    node_names: tuple[str, ...]
    strategy: str | None

    def __post_init__(self) -> None:
        if bool(self.gpus) == bool(self.node_names):
            raise UsageError(
                "give the GPUs to check against: --gpu MODEL or --node NODE (not both)"
            )
        if self.count != 1 and not self.gpus:
            raise UsageError("--count applies to --gpu only (a node's count comes from its labels)")


def _target_options(f: F) -> F:
    for option in reversed(_TARGET_OPTIONS):
        f = option(f)
    return f


@click.command("validate")
@_target_options
@global_options
@pass_settings
def validate_cmd(settings: Settings, **flags: Any) -> None:
    """Check that each selected config fits every GPU it selects, with explicit placements.

    Without -c every config in the file is checked. Per GPU: the profiles exist on its model,
    instance caps and the single +me instance hold, and a non-overlapping placement exists;
    with --strategy, the device plugin's MIG strategy accepts the node too.

    Exit status: 0 every config fits, 1 any does not, 2 usage error (e.g. an unknown model).

    \b
    Examples:
      kubectl gpu mig validate -f config.yaml --gpu A100-40GB --gpu H100-80GB
      kubectl gpu mig validate -f config.yaml -c all-balanced --node gpu-node-1 -o json
    """
    request = CheckRequest(**flags)
    results = _check(settings, request, all_by_default=True)
    rows = [row for result in results for row in _rows(result)]
    render.emit_table(rows, _VALIDATE_COLUMNS, settings.output, _document(results, request))
    _finish(results)


@click.command("plan")
@_target_options
@global_options
@pass_settings
def plan_cmd(settings: Settings, **flags: Any) -> None:
    """Draw the layout each GPU gets and the resources the device plugin will advertise.

    SLICES shows a GPU's memory slices left to right, each GPU instance over the slices it
    takes (. = free). -c may be left out when the file holds one config.

    \b
    Examples:
      kubectl gpu mig plan -f config.yaml -c all-balanced --gpu H100-80GB
      kubectl gpu mig plan -f config.yaml -c all-1g.10gb --node gpu-node-1 --strategy single
    """
    request = CheckRequest(**flags)
    results = _check(settings, request, all_by_default=False)
    rows = [row for result in results for row in _rows(result)]
    render.emit_table(rows, _PLAN_COLUMNS, settings.output, _document(results, request))
    _finish(results)


def _check(
    settings: Settings, request: CheckRequest, all_by_default: bool
) -> tuple[ConfigVerdict, ...]:
    from kubectl_gpu.mig import nodes, verdicts

    config_file = _read_config(request.filename)
    names = _names(config_file, request.config_names, all_by_default)
    if request.gpus:
        targets = [nodes.model_target(g, request.count) for g in request.gpus]
        return verdicts.check_file(config_file, names, targets, request.strategy)
    return tuple(
        verdicts.check(name, config_file.select(name), target, request.strategy or strategy)
        for name in names
        for target, strategy in _node_targets(settings, request.node_names)
    )


def _names(config_file: MigConfigFile, asked: tuple[str, ...], all_by_default: bool) -> list[str]:
    for name in asked:
        config_file.select(name)  # an unknown name fails here, before any cluster read
    if asked:
        return list(dict.fromkeys(asked))
    if all_by_default or len(config_file.names) == 1:
        return list(config_file.names)
    raise UsageError(
        "missing required flag 'selected-config' when more than one config available: choose "
        "one with -c NAME",
        hint=f"available: {', '.join(config_file.names)}",
    )


def _node_targets(settings: Settings, names: Sequence[str]) -> list[tuple[Target, str | None]]:
    """Each node's GPUs and device-plugin MIG strategy, read as `mig apply` reads them (the
    agent's report, else GFD's labels), so that both give one verdict for one node."""
    from kubectl_gpu import cluster  # lazy: offline checks never import kubernetes
    from kubectl_gpu.workflows.mig import strategy as mig_strategy
    from kubectl_gpu.workflows.mig import targets as mig_targets

    api = cluster.connect(settings.kubeconfig, settings.context)
    scope = mig_targets.Scope(names=tuple(dict.fromkeys(names)))
    found = mig_targets.read(api, scope, policies=())
    served = mig_strategy.read(api, {f.name: f.labels for f in found})
    targets = []
    for facts in found:
        if facts.target is None:
            raise GpuError(f"node {facts.name}: {facts.problem}")
        strategy = served[facts.name]
        if strategy.strategy is not None:
            render.say(f"node {facts.name}: device plugin {strategy.explain()}", err=True)
        targets.append((facts.target, strategy.strategy))
    return targets


def _read_config(filename: str) -> MigConfigFile:
    return inputs.load_mig_config(filename)[1].config


def _finish(results: Sequence[ConfigVerdict]) -> None:
    good = sum(r.fits for r in results)
    configs = len({r.config for r in results})
    targets = len({r.target.name for r in results})
    click.echo(
        f"{good} of {len(results)} fit ({configs} config(s) × {targets} target(s))", err=True
    )
    failed = good < len(results)
    click.get_current_context().exit(int(ExitCode.ERROR if failed else ExitCode.OK))


# --- tables ----------------------------------------------------------------------------------


def _grouped(result: ConfigVerdict) -> list[tuple[str, GpuVerdict]]:
    """GPUs with the same outcome in one row, as `0-7`."""

    def outcome(v: GpuVerdict) -> tuple[Any, ...]:
        return (v.status, v.spec, v.mig_enabled, v.layout, v.problem, v.gpu.name)

    rows = []
    for _, run in itertools.groupby(result.gpus, key=outcome):
        same = list(run)
        first, last = same[0].gpu.index, same[-1].gpu.index
        rows.append((str(first) if first == last else f"{first}-{last}", same[0]))
    return rows


def _resources(verdict: GpuVerdict | None, strategy: str | None) -> dict[str, int]:
    from kubectl_gpu.mig import verdicts

    return verdicts.gpu_resources(verdict, strategy) if verdict else {}


def _model(verdict: GpuVerdict) -> str:
    return verdict.gpu.model.key if verdict.gpu.model else verdict.gpu.name


def _layout_text(verdict: GpuVerdict) -> str:
    if verdict.problem:
        return verdict.problem
    if not verdict.mig_enabled:
        return "MIG disabled"
    if not verdict.layout:
        return "MIG enabled, no instances"
    return " ".join(_instance_text(p) for p in _by_start(verdict.layout))


def _instance_text(placed: PlacedInstance) -> str:
    devices = [d.name for d in placed.compute_instances]
    inside = "" if devices == [placed.profile.name] else f"({','.join(devices)})"
    return f"{placed}{inside}"


def _devices(verdict: GpuVerdict) -> list[str]:
    return [d.name for p in _by_start(verdict.layout) for d in p.compute_instances]


def _by_start(layout: Layout) -> list[PlacedInstance]:
    return sorted(layout, key=lambda p: p.placement.start)


@dataclasses.dataclass(frozen=True)
class _Row:
    """A run of GPUs with one outcome (`verdict`), or a node-wide `problem`; cells are
    computed only for the columns shown."""

    result: ConfigVerdict
    gpus: str
    verdict: GpuVerdict | None = None
    problem: str = ""


def _rows(result: ConfigVerdict) -> list[_Row]:
    rows = [_Row(result, gpus, verdict) for gpus, verdict in _grouped(result)]
    return rows + [_Row(result, "*", None, problem) for problem in result.problems]


def _cell(
    per_gpu: Callable[[GpuVerdict], Any], problem: Callable[[_Row], Any]
) -> Callable[[_Row], Any]:
    return lambda row: per_gpu(row.verdict) if row.verdict else problem(row)


def draw(layout: Layout, memory_slices: int) -> str:
    """A GPU's memory slices left to right, each instance's name over the slices it takes."""
    width = max([_SLICE_WIDTH, *(len(p.profile.name) for p in layout if p.placement.size == 1)])
    cells, at = [], 0
    for placed in _by_start(layout):
        cells += ["." * width] * (placed.placement.start - at)
        cells.append(placed.profile.name.ljust(placed.placement.size * (width + 1) - 1))
        at = placed.placement.start + placed.placement.size
    cells += ["." * width] * (memory_slices - at)
    return "|" + "|".join(cells) + "|"


def _slices(verdict: GpuVerdict) -> str:
    model = verdict.gpu.model
    if verdict.status == FITS and verdict.mig_enabled and model is not None:
        return draw(verdict.layout, model.board.memory_slices)
    if verdict.status == FITS:
        return _layout_text(verdict)
    return f"{verdict.status.value}: {verdict.problem}"


_CONFIG = Column("CONFIG", lambda r: r.result.config)
_TARGET = Column("TARGET", lambda r: r.result.target.name)
_GPU = Column("GPU", lambda r: r.gpus)
_MODEL = Column("MODEL", _cell(_model, lambda r: "*"))
_RESOURCES = Column("RESOURCES", lambda r: _resources(r.verdict, r.result.strategy))
_VALIDATE_COLUMNS = (
    _CONFIG,
    _TARGET,
    _GPU,
    _MODEL,
    Column("VERDICT", _cell(lambda v: v.status.value, lambda r: DOES_NOT_FIT)),
    Column("DETAIL", _cell(_layout_text, lambda r: r.problem)),
    Column(
        "SPEC", _cell(lambda v: None if v.spec is None else f"#{v.spec + 1}", lambda r: None), True
    ),
    dataclasses.replace(_RESOURCES, wide_only=True),
)
_PLAN_COLUMNS = (
    _CONFIG,
    _TARGET,
    _GPU,
    _MODEL,
    _RESOURCES,
    Column("DEVICES", _cell(_devices, lambda r: None), wide_only=True),
    Column("SLICES", _cell(_slices, lambda r: r.problem)),
)


# --- documents (-o json|yaml) ----------------------------------------------------------------


def _document(results: Sequence[ConfigVerdict], request: CheckRequest) -> dict[str, Any]:
    """The result as schemas/mig-validate-result.v1.json describes it."""
    from kubectl_gpu.mig.verdicts import to_dict

    return {
        "apiVersion": render.API_VERSION,
        "kind": "MigValidationResult",
        "file": "<stdin>" if request.filename == "-" else request.filename,
        "strategy": request.strategy,
        "fits": all(r.fits for r in results),
        "results": [to_dict(r) for r in results],
    }
