"""`kubectl gpu validate`: check configs before they reach a node.

Reads the inputs (files, directories, stdin) and hands their text to
`validation.validate_text`; the verdicts are rendered by `render`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path as FsPath

import click

from kubectl_gpu.cli import inputs, render
from kubectl_gpu.cli.settings import Settings, global_options, pass_settings
from kubectl_gpu.errors import ExitCode, UsageError

_SUFFIXES = (".yaml", ".yml", ".json")
KIND_CHOICES = (
    "auto",
    "device-plugin-config",
    "mig-config",
    "configmap",
    "mig-parted-hooks",
    "mig-manager-gpu-clients",
    "dra",
    "device-plugin-chart-values",
    "gpu-operator-values",
)


@click.command(short_help="Check device-plugin, MIG and DRA configs before they reach a node.")
@click.option(
    "-f",
    "--filename",
    "filenames",
    multiple=True,
    required=True,
    metavar="FILE",
    help="File, directory or '-' (stdin) to validate; repeatable.",
)
@click.option("-R", "--recursive", is_flag=True, help="Descend into directories given with -f.")
@click.option(
    "--kind",
    type=click.Choice(KIND_CHOICES),
    default="auto",
    show_default=True,
    help="Treat every document as this kind instead of detecting it.",
)
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
@global_options
@pass_settings
def validate(
    settings: Settings, filenames: tuple[str, ...], recursive: bool, kind: str, strict: bool
) -> None:
    """Check device-plugin, MIG and DRA configs, strictly, with file, line and fix.

    Recognises NVIDIA device-plugin configs (time-slicing, MPS, flags), mig-parted
    configs (and their hooks and GPU-clients files), ConfigMaps holding them, and DRA
    ResourceClaims, ResourceClaimTemplates and DeviceClasses (alone or in a kubectl List)
    with the NVIDIA DRA driver's GpuConfig and MigDeviceConfig sharing rules.
    Catches what the upstream tools accept silently: unknown or misplaced keys,
    wrong case, quoted booleans, time-slicing next to MPS, replicas below 2.

    Exit status: 0 valid (warnings allowed), 1 invalid, 2 usage error.

    \b
    Examples:
      kubectl gpu validate -f time-slicing.yaml
      kubectl get cm -n gpu-operator time-slicing-config -o yaml | kubectl gpu validate -f -
      kubectl gpu validate -f configs/ -R -o json
      kubectl get resourceclaimtemplates -A -o yaml | kubectl gpu validate -f -
    """
    from kubectl_gpu import validation

    reports = [
        validation.validate_text(text, name, kind)
        if text is not None
        else validation.unreadable(name, problem)
        for name, text, problem in _read_inputs(filenames, recursive)
    ]
    render.emit_validation(reports, settings.output)
    failed = any(not r.valid for r in reports) or (strict and any(r.findings for r in reports))
    click.get_current_context().exit(int(ExitCode.ERROR if failed else ExitCode.OK))


def _read_inputs(names: tuple[str, ...], recursive: bool) -> Iterator[tuple[str, str | None, str]]:
    if names.count("-") > 1:
        raise UsageError("stdin ('-') can be read only once")
    for name in names:
        if name == "-":
            yield _read(inputs.STDIN)
            continue
        path = FsPath(name)
        if name and path.is_dir():
            entries = _config_files(path, recursive)
            if not entries:
                raise UsageError(f"directory {name} holds no .yaml, .yml or .json file")
            for file, problem in entries:
                yield (inputs.display_name(file), None, problem) if problem else _read(file)
        else:
            yield _read(name)


def _config_files(top: FsPath, recursive: bool) -> list[tuple[str, str]]:
    """(path, problem) of each config file under `top`, sorted; an entry that cannot be
    listed or looked at (no permission, a path too long) is one with its problem, so that
    the rest are still checked."""
    found: list[tuple[str, str]] = []

    def unreadable(e: OSError) -> None:
        found.append((str(e.filename or top), f"cannot read the directory: {e.strerror or e}"))

    for folder, dirs, names in os.walk(top, onerror=unreadable):
        if not recursive:
            dirs.clear()
        for entry in names:
            if FsPath(entry).suffix not in _SUFFIXES:
                continue
            file = os.path.join(folder, entry)
            try:
                if FsPath(file).is_file():
                    found.append((file, ""))
            except OSError as e:
                found.append((file, f"cannot read the file: {e.strerror or e}"))
    return sorted(found)


def _read(filename: str) -> tuple[str, str | None, str]:
    try:
        name, text = inputs.read_text(filename)
    except inputs.UnreadableInput as e:
        return e.name, None, e.problem
    return name, text, ""
