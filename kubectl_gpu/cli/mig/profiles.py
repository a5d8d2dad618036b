"""`kubectl gpu mig profiles`: the GPU-instance profiles of each known GPU model.

Renders the geometry tables of kubectl_gpu.mig.models, one row per model and profile with its
placements; `-o json|yaml` print a `MigProfileList` (models, products, profiles with
placements). Offline: imports no cluster code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from kubectl_gpu.cli import render
from kubectl_gpu.cli.render import Column
from kubectl_gpu.cli.settings import Settings, global_options, pass_settings

if TYPE_CHECKING:  # the MIG domain is imported when the command runs
    from kubectl_gpu.mig.models import GiProfile, GpuModel


@click.command("profiles")
@click.option(
    "--gpu",
    "gpus",
    multiple=True,
    metavar="MODEL",
    help="Only this model (key, NVML product name, nvidia.com/gpu.product value or PCI ID).",
)
@global_options
@pass_settings
def profiles_cmd(settings: Settings, gpus: tuple[str, ...]) -> None:
    """List the GPU-instance profiles of each known GPU model, with their placements.

    PLACEMENTS are the memory slices an instance may start at and how many it spans, as
    `nvidia-smi mig -lgipp` prints them; a trailing ? marks placements not verified.
    """
    from kubectl_gpu.mig import models

    chosen = list(dict.fromkeys(models.find(g)[0] for g in gpus)) if gpus else models.MODELS
    rows = [(model, profile) for model in chosen for profile in model.profiles]
    render.emit_table(rows, _PROFILE_COLUMNS, settings.output, _profiles_document(chosen))
    for model in chosen:
        if model.note:
            click.echo(f"note: {model.key}: {model.note}", err=True)


def _placements(model: GpuModel, profile: GiProfile) -> str:
    return str(profile.shape) + ("" if model.placements_verified else " ?")


_PROFILE_COLUMNS = (
    Column("MODEL", lambda r: r[0].key),
    Column("PROFILE", lambda r: r[1].name),
    Column("COMPUTE", lambda r: f"{r[1].compute_slices}/{r[0].board.compute_slices}"),
    Column("MEMORY", lambda r: f"{r[1].shape.memory_slices}/{r[0].board.memory_slices}"),
    Column("MAX", lambda r: r[1].max_instances),
    Column("PLACEMENTS", lambda r: _placements(r[0], r[1])),
    Column(
        "COMPUTE INSTANCES", lambda r: [n.split(".", 1)[0] for n in r[1].compute_instance_profiles]
    ),
    Column("PCI IDS", lambda r: [p.pci_id for p in r[0].products], wide_only=True),
)


def _profiles_document(chosen: Sequence[GpuModel]) -> dict[str, Any]:
    """`kind: MigProfileList`: each model's products, slices and profiles with placements."""
    from kubectl_gpu.mig import models

    return {
        "apiVersion": render.API_VERSION,
        "kind": "MigProfileList",
        "models": [models.to_dict(m) for m in chosen],
    }
