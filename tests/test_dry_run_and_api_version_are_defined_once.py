"""`--dry-run` is defined once (`cli/params.dry_run_option`) and behaves alike in every
command that writes (kubectl's `none|client|server`, a bare flag meaning `client`); our
documents' apiVersion is defined once (`keys.API_VERSION`) and every document carries it."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from kubectl_gpu import keys
from kubectl_gpu.cli import cli

PACKAGE = Path(__file__).resolve().parent.parent / "kubectl_gpu"


def literals(pattern: str) -> list[str]:
    return [
        f"{path.relative_to(PACKAGE)}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for _ in re.finditer(pattern, path.read_text(encoding="utf-8"))
    ]


def test_each_is_written_once_in_the_package() -> None:
    assert literals(r'"--dry-run"') == ["cli/params.py"]
    assert literals(r'"kubectl-gpu\.io/v1"') == ["keys.py"]


@pytest.mark.parametrize("path", [("share",), ("install",), ("mig", "apply")])
def test_every_writing_command_takes_the_same_dry_run(path: tuple[str, ...]) -> None:
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), name)
        assert found is not None
        command = found
    [option] = [p for p in command.params if p.name == "dry_run"]
    assert isinstance(option, click.Option) and isinstance(option.type, click.Choice)
    assert list(option.type.choices) == ["none", "client", "server"]
    assert (option.default, option.flag_value) == ("none", "client")


def test_the_documents_name_the_one_api_version() -> None:
    from kubectl_gpu.cli import render
    from kubectl_gpu.gpumap import report
    from kubectl_gpu.usage import document

    assert render.API_VERSION == report.API_VERSION == document.API_VERSION == keys.API_VERSION
