"""Hostile inputs to `validate` and the commands that read -f: tagged and huge scalars, numbers
YAML parsers read differently, files that are not files, a ConfigMap that is not a mapping, and
terminal escapes in names. Each gets a finding or error naming the file, never a traceback."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

Run = Callable[..., CliResult]
MIG = "version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n"
PLUGIN = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n      - name: nvidia.com/gpu\n"


def _count(value: str) -> str:
    return MIG + "      mig-devices:\n        1g.10gb: " + value + "\n"


def _replicas(value: str) -> str:
    return PLUGIN + "        replicas: " + value + "\n"


CASES = {
    "tagged-int": (_count("!!int x"), "yaml.bad-scalar", "'x' is not a valid !!int value"),
    "tagged-empty-int": (_replicas("!!int ''"), "yaml.bad-scalar", "'' is not a valid !!int"),
    "tagged-float": (_count("!!float x"), "yaml.bad-scalar", "'x' is not a valid !!float"),
    "tagged-bool": (
        MIG.replace("mig-enabled: true", "mig-enabled: !!bool maybe") + "      mig-devices: {}\n",
        "yaml.bad-scalar",
        "'maybe' is not a valid !!bool value",
    ),
    # a local tag makes the scalar a string to Go's reader (mig-parted refuses it as a count)
    "unknown-tag": (_count("!mine 3"), "yaml.tag-makes-string", "makes 3 the string '3'"),
    "5000-digits": (_replicas("9" * 5000), "yaml.number-too-large", "has 5000 characters"),
    "huge-count": (_count("99999999999999999999"), "mig.count-cannot-fit", "more than 7"),
    "huge-replicas": (
        _replicas("99999999999999999999"),
        "sharing.replicas-out-of-range",
        "cannot unmarshal number",
    ),
    "huge-index": (
        MIG.replace("devices: all", "devices: [99999999999999999999]") + "      mig-devices: {}\n",
        "mig.gpu-index-too-large",
        "larger than any node has",
    ),
    "sexagesimal": (_replicas("1:30"), "yaml.sexagesimal-number", "base-60"),
    "hex": (_replicas("0x10"), "yaml.non-decimal-number", "'0x10' is read as 16 (base 16)"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_hostile_scalar_is_a_finding_with_file_and_line(
    run_cli: Run, tmp_path: Path, case: str
) -> None:
    text, code, message = CASES[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(text)

    result = run_cli("validate", "-f", str(path))

    assert result.exception is None and result.exit_code in (0, 1)
    (line,) = [ln for ln in result.stdout.splitlines() if f"[{code}]" in ln]
    assert line.startswith(f"{path}:") and message in line
    assert len(line) < 400  # a 5,000-digit value is cut short
    assert "expected an integer, found the string" not in result.stdout  # said once


def test_mig_validate_refuses_a_huge_count_at_once(run_cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(_count("99999999999999999999"))

    result = run_cli("mig", "validate", "-f", str(path), "--gpu", "H100-SXM5-80GB")

    assert result.exit_code == 1 and result.exception is None
    assert "no GPU has more than 7 MIG slices" in result.stderr


def test_a_fifo_is_refused_instead_of_waiting_for_ever(run_cli: Run, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)

    result = run_cli("validate", "-f", str(fifo))
    mig = run_cli("mig", "validate", "-f", str(fifo), "--gpu", "H100-SXM5-80GB")

    assert result.exit_code == 1 and f"{fifo}: error: a FIFO (named pipe)" in result.stdout
    assert mig.exit_code == 1 and "a FIFO (named pipe), not a file" in mig.stderr


def test_an_empty_file_name_does_not_validate_the_current_directory(
    run_cli: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "other.yaml").write_text("kind: Pod\napiVersion: v1\n")

    result = run_cli("validate", "-f", "")

    assert result.exit_code == 1 and "other.yaml" not in result.stdout
    assert "the file name is empty" in result.stdout


def test_a_directory_is_refused_where_one_file_is_expected(run_cli: Run, tmp_path: Path) -> None:
    result = run_cli("mig", "validate", "-f", str(tmp_path), "--gpu", "H100-SXM5-80GB")

    assert result.exit_code == 1 and "a directory, not a file" in result.stderr


@pytest.mark.parametrize(("text", "what"), [("", "empty"), ("[1, 2]\n", "a list, not a mapping")])
def test_kind_configmap_on_a_non_mapping_names_the_file(
    run_cli: Run, tmp_path: Path, text: str, what: str
) -> None:
    path = tmp_path / "cm.yaml"
    path.write_text(text)

    result = run_cli("validate", "--kind", "configmap", "-f", str(path))

    assert result.exit_code == 1 and result.exception is None
    assert f"{path}" in result.stdout and f"the document is {what}" in result.stdout


def test_terminal_escapes_in_names_and_keys_are_printed_escaped(
    run_cli: Run, tmp_path: Path
) -> None:
    path = tmp_path / "evil\x1b[2J\nname.yaml"
    path.write_text('version: v1\nflags:\n  "\\e]0;pwned\\ax": 1\n  "\\x9b31m": 2\n')

    result = run_cli("validate", "-f", str(path))

    assert result.exit_code == 1
    out = result.stdout + result.stderr
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    assert "evil\\x1b[2J\\nname.yaml" in out and "\\x1b]0;pwned\\x07x" in out


def test_an_unreadable_entry_under_recursive_is_named_and_the_rest_checked(
    run_cli: Run, tmp_path: Path
) -> None:
    (tmp_path / "good.yaml").write_text(MIG + "      mig-devices: {}\n")
    fd = os.open(tmp_path, os.O_RDONLY)
    for _ in range(18):  # a path longer than PATH_MAX: listing it fails, even for root
        os.mkdir("d" * 250, dir_fd=fd)
        inner = os.open("d" * 250, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)

    result = run_cli("validate", "-R", "-f", str(tmp_path))

    assert result.exit_code == 1, result.stderr
    assert result.exception is None
    assert "cannot read the directory: File name too long" in result.stdout + result.stderr
    assert "good.yaml: valid" in result.stdout + result.stderr  # the rest is still checked
