"""`kubectl gpu validate` as a user drives it: inputs, exit codes, output formats."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import ROOT, CliResult

Run = Callable[..., CliResult]
GOOD = """version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 4
"""
BAD = "version: v1\nflags:\n  migStrategy: Mixed\n"


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_valid_file_exits_0_and_says_so(run_cli: Run, tmp_path: Path) -> None:
    result = run_cli("validate", "-f", write(tmp_path, "good.yaml", GOOD))
    assert result.exit_code == 0, result.stderr
    assert "good.yaml: valid (device-plugin-config)" in result.stdout
    assert "1 file valid: 0 error(s), 0 warning(s)" in result.stderr


def test_the_summary_counts_the_invalid_files_among_several(run_cli: Run, tmp_path: Path) -> None:
    good = [write(tmp_path, f"good-{i}.yaml", GOOD) for i in range(4)]
    bad = [write(tmp_path, f"bad-{i}.yaml", "version: v2\n") for i in range(2)]
    mixed = run_cli("validate", *[a for f in good + bad for a in ("-f", f)])
    clean = run_cli("validate", *[a for f in good for a in ("-f", f)])
    assert mixed.exit_code == 1
    assert "6 files, 2 invalid: 2 error(s), 0 warning(s)" in mixed.stderr
    assert clean.exit_code == 0
    assert "4 files, all valid: 0 error(s), 0 warning(s)" in clean.stderr


def test_an_invalid_file_exits_1_with_file_line_column_and_hint(
    run_cli: Run, tmp_path: Path
) -> None:
    path = write(tmp_path, "bad.yaml", BAD)
    result = run_cli("validate", "-f", path)
    assert result.exit_code == 1
    assert f"{path}:3:16: error: unknown MIG strategy: Mixed" in result.stdout
    assert "hint: write 'mixed' (values are case-sensitive)" in result.stdout
    assert result.exception is None


def test_several_files_are_all_checked(run_cli: Run, tmp_path: Path) -> None:
    result = run_cli(
        "validate",
        "-f",
        write(tmp_path, "a.yaml", GOOD),
        "-f",
        write(tmp_path, "b.yaml", BAD),
        "-o",
        "json",
    )
    assert result.exit_code == 1
    assert [(f["file"].rsplit("/", 1)[-1], f["valid"]) for f in result.json["files"]] == [
        ("a.yaml", True),
        ("b.yaml", False),
    ]


def test_stdin_is_read_with_dash(run_cli: Run) -> None:
    result = run_cli("validate", "-f", "-", input=BAD)
    assert result.exit_code == 1 and "<stdin>:3:16: error:" in result.stdout


def test_json_output_follows_its_published_schema(run_cli: Run, tmp_path: Path) -> None:
    result = run_cli("validate", "-o", "json", "-f", write(tmp_path, "bad.yaml", BAD))
    contract = json.loads((ROOT / "schemas" / "validate-result.v1.json").read_text())
    jsonschema.validate(result.json, contract)
    [finding] = result.json["files"][0]["findings"]
    assert finding["line"] == 3 and finding["path"] == "/flags/migStrategy"
    assert result.json["summary"] == {"files": 1, "errors": 1, "warnings": 0}


def test_yaml_output_is_the_same_document(run_cli: Run, tmp_path: Path) -> None:
    import yaml

    path = write(tmp_path, "bad.yaml", BAD)
    as_yaml = yaml.safe_load(run_cli("validate", "-o", "yaml", "-f", path).stdout)
    assert as_yaml == run_cli("validate", "-o", "json", "-f", path).json


def test_global_flags_work_before_the_subcommand_too(run_cli: Run, tmp_path: Path) -> None:
    result = run_cli("-o", "json", "validate", "-f", write(tmp_path, "bad.yaml", BAD))
    assert result.json["valid"] is False


def test_a_missing_file_is_reported_and_the_others_still_checked(
    run_cli: Run, tmp_path: Path
) -> None:
    result = run_cli(
        "validate", "-f", str(tmp_path / "nope.yaml"), "-f", write(tmp_path, "good.yaml", GOOD)
    )
    assert result.exit_code == 1
    assert "nope.yaml: error: the file does not exist [input.unreadable]" in result.stdout
    assert "good.yaml: valid" in result.stdout


def test_an_oversized_input_is_refused_without_parsing(run_cli: Run, tmp_path: Path) -> None:
    path = write(tmp_path, "big.yaml", "# x\n" * (1024 * 1024 + 1))
    result = run_cli("validate", "-f", path)
    assert result.exit_code == 1 and "larger than 4 MiB" in result.stdout


def test_binary_input_is_refused_clearly(run_cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_bytes(b"\x80\x81garbage\xff")
    result = run_cli("validate", "-f", str(path))
    assert result.exit_code == 1 and "not UTF-8 text" in result.stdout


def test_utf16_with_a_byte_order_mark_is_read_as_nvidias_reader_reads_it(
    run_cli: Run, tmp_path: Path
) -> None:
    path = tmp_path / "x.yaml"
    path.write_bytes(GOOD.encode("utf-16"))  # Python writes the BOM first
    assert run_cli("validate", "-f", str(path)).exit_code == 0
    path.write_bytes(GOOD.encode("utf-16")[:-1])  # half a character at the end
    result = run_cli("validate", "-f", str(path))
    assert result.exit_code == 1 and "nor UTF-16 with a byte-order mark" in result.stdout


def test_a_directory_is_walked_for_yaml_files(run_cli: Run, tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", GOOD)
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub", "b.yml", BAD)
    flat = run_cli("validate", "-o", "json", "-f", str(tmp_path))
    deep = run_cli("validate", "-o", "json", "-R", "-f", str(tmp_path))
    assert flat.json["summary"]["files"] == 1 and flat.exit_code == 0
    assert deep.json["summary"]["files"] == 2 and deep.exit_code == 1


def test_strict_makes_warnings_fail(run_cli: Run, tmp_path: Path) -> None:
    path = write(tmp_path, "w.yaml", "version: v1\nflags:\n  failOnInitError: yes\n")
    assert run_cli("validate", "-f", path).exit_code == 0
    assert run_cli("validate", "--strict", "-f", path).exit_code == 1


@pytest.mark.parametrize(
    "args",
    [
        ["validate"],
        ["validate", "-f", "x", "-o", "xml"],
        ["validate", "-f", "-", "-f", "-"],
        ["nosuchcommand"],
    ],
)
def test_usage_errors_exit_2_without_traceback(run_cli: Run, args: list[str]) -> None:
    result = run_cli(*args)
    assert result.exit_code == 2, result.stdout
    assert result.exception is None
    assert "Traceback" not in result.stderr


def test_kind_can_be_forced(run_cli: Run, tmp_path: Path) -> None:
    path = write(tmp_path, "m.yaml", "version: v1\nflags: {}\n")
    result = run_cli("validate", "--kind", "mig-config", "-o", "json", "-f", path)
    assert result.exit_code == 1
    assert result.json["files"][0]["documents"][0]["kind"] == "mig-config"


def test_an_unrelated_kubernetes_object_is_named(run_cli: Run, tmp_path: Path) -> None:
    path = write(tmp_path, "d.yaml", "apiVersion: apps/v1\nkind: Deployment\n")
    result = run_cli("validate", "-f", path)
    assert result.exit_code == 1
    assert "a Deployment is not a config kubectl gpu can validate" in result.stdout


def test_version_flag(run_cli: Run) -> None:
    from kubectl_gpu import __version__

    result = run_cli("--version")
    assert result.exit_code == 0 and result.stdout.strip() == f"kubectl-gpu {__version__}"


def test_every_listed_command_has_working_help(run_cli: Run) -> None:
    from kubectl_gpu.cli import cli

    listed = cli.list_commands(None)  # type: ignore[arg-type]
    assert "validate" in listed
    for name in listed:
        result = run_cli(name, "--help")
        assert result.exit_code == 0, (name, result.stderr)
        assert f"Usage: kubectl gpu {name}" in result.stdout


def test_root_help_lists_each_command_with_its_own_short_help(run_cli: Run) -> None:
    from kubectl_gpu.cli import COMMANDS, cli

    shown = run_cli("--help").stdout
    for name in cli.list_commands(None):  # type: ignore[arg-type]
        command = cli.get_command(None, name)  # type: ignore[arg-type]
        assert command is not None
        assert command.get_short_help_str(limit=200) == COMMANDS[name][2]
        assert COMMANDS[name][2] in shown


def test_commands_not_built_yet_are_not_offered(run_cli: Run) -> None:
    from importlib.util import find_spec

    from kubectl_gpu.cli import COMMANDS

    missing = [name for name, (module, _, _) in COMMANDS.items() if not find_spec(module)]
    shown = run_cli("--help").stdout
    for name in missing:
        assert f"  {name} " not in shown
        assert run_cli(name).exit_code == 2


def test_kubectl_get_configmaps_output_beside_a_deployment_is_validated(
    run_cli: Run, tmp_path: Path
) -> None:
    """Issue 31: `kubectl get cm -o yaml` prints a List; a manifest file holds other kinds."""
    import base64

    value = GOOD.replace("name: nvidia.com/gpu", 'name: "nvidia.com\\/gpu"')  # YAML 1.2 only
    listed = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},
             "data": {"escaped": value},
             "binaryData": {"utf16": base64.b64encode(GOOD.encode("utf-16")).decode()}},
        ],
    }  # fmt: skip
    deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n"
    path = write(tmp_path, "cms.yaml", json.dumps(listed) + "\n---\n" + deployment)
    result = run_cli("validate", "-f", path, "-o", "json")
    assert result.exit_code == 1, result.stderr
    (report,) = json.loads(result.stdout)["files"]
    by_code = {f["code"]: f for f in report["findings"]}
    assert set(by_code) == {"yaml.syntax", "document.skipped"}
    assert by_code["yaml.syntax"]["path"] == "/items/0/data/escaped"
    assert "unknown escape character '/'" in by_code["yaml.syntax"]["message"]
    assert report["documents"][0]["keys"]["0/utf16"] == "device-plugin-config"
