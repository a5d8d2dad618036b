"""A lone surrogate (JSON's `"\\ud800"`), a bidi override (U+202E) or a control character in a
kubelet checkpoint or a `--pods` file is shown escaped in every table and text output, never
written raw and never an internal error (exit 70: a lone surrogate cannot be encoded as
UTF-8). One helper escapes every table cell and text line (`errors.printable`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kubectl_gpu import errors
from tests.conftest import DATA, CliResult

CHECKPOINT = DATA / "checkpoints" / "minikube-1gpu.json"
RAW = ("\ud800", "\u202e", "\x1b", "\u200b")


def _hostile_checkpoint(tmp_path: Path) -> Path:
    text = CHECKPOINT.read_text()
    text = text.replace('"ContainerName": "cuda"', '"ContainerName": "cu\\ud800da\\u202egnp.exe"')
    text = text.replace('"PodUID": "f2b9f4e5', '"PodUID": "\\u001b[2J\\u200bf2b9f4e5')
    path = tmp_path / "checkpoint.json"
    path.write_text(text)
    return path


def _hostile_pods(tmp_path: Path) -> Path:
    path = tmp_path / "pods.json"
    path.write_text(
        '{"apiVersion":"v1","kind":"List","items":[{"metadata":{"name":"p\\ud800od\\u202e",'
        '"namespace":"default","uid":"f2b9f4e5-ba3b-418e-ab8c-c1751a0619d8"},'
        '"spec":{"nodeName":"n"}}]}'
    )
    return path


def _assert_escaped(result: CliResult) -> None:
    assert result.exit_code == 0, result.stderr
    shown = result.stdout + result.stderr
    for raw in RAW:
        assert raw not in shown


@pytest.mark.parametrize("output", [[], ["-o", "wide"], ["--tree"]])
def test_a_checkpoint_with_hostile_strings_is_shown_escaped(
    run_cli: Callable[..., CliResult], tmp_path: Path, output: list[str]
) -> None:
    result = run_cli("map", "--checkpoint", str(_hostile_checkpoint(tmp_path)), *output)

    _assert_escaped(result)
    if output == ["-o", "wide"]:
        assert "cu\\ud800da\\u202egnp.exe" in result.stdout


@pytest.mark.parametrize("output", [[], ["-o", "wide"]])
def test_a_pods_file_with_hostile_names_is_shown_escaped(
    run_cli: Callable[..., CliResult], tmp_path: Path, output: list[str]
) -> None:
    result = run_cli(
        "map", "--checkpoint", str(CHECKPOINT), "--pods", str(_hostile_pods(tmp_path)), *output
    )

    _assert_escaped(result)
    assert "default/p\\ud800od\\u202e" in result.stdout


@pytest.mark.parametrize("output", [["-o", "json"], ["-o", "yaml"]])
def test_data_outputs_carry_the_value_escaped_by_their_format(
    run_cli: Callable[..., CliResult], tmp_path: Path, output: list[str]
) -> None:
    result = run_cli("map", "--checkpoint", str(_hostile_checkpoint(tmp_path)), *output)

    _assert_escaped(result)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a\u202eb", "a\\u202eb"),
        ("a\ud800b", "a\\ud800b"),
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        ("a\u2066b\u2069", "a\\u2066b\\u2069"),
        ("tab\there", "tab\\there"),
        ("GPU-ü 日本", "GPU-ü 日本"),
    ],
)
def test_the_one_helper_escapes_controls_bidi_and_surrogates_only(text: str, shown: str) -> None:
    assert errors.printable(text) == shown
