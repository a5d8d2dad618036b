"""The package installs and runs as users get it: light imports, schemas shipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

HEAVY = ["kubernetes", "pynvml", "grpc", "jsonschema", "tabulate", "yaml"]
PROBE = """
import json, sys
from kubectl_gpu.cli import cli
try:
    cli.main({args}, standalone_mode=False)
except SystemExit:
    pass
print(json.dumps(sorted(m for m in {heavy} if m in sys.modules)))
"""


def imported_by(args: list[str]) -> list[str]:
    code = PROBE.format(args=args, heavy=HEAVY)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("args", [["--help"], ["validate", "--help"], ["--version"]])
def test_help_imports_no_heavy_library(args: list[str]) -> None:
    assert imported_by(args) == []


def test_root_help_imports_no_command_module() -> None:
    code = (
        "import sys\nfrom kubectl_gpu.cli import cli\n"
        "try:\n    cli.main(['--help'], standalone_mode=False)\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('kubectl_gpu.cli.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "['kubectl_gpu.cli.settings']"


def test_validate_never_imports_the_cluster_or_device_libraries(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("version: v1\n")
    loaded = imported_by(["validate", "-f", str(config)])
    assert not {"kubernetes", "pynvml", "grpc"} & set(loaded)


def test_every_schema_is_a_valid_closed_draft_2020_12_schema() -> None:
    import jsonschema

    for path in sorted((ROOT / "schemas").glob("*.json")):
        document = json.loads(path.read_text())
        jsonschema.Draft202012Validator.check_schema(document)
        assert document["$id"].endswith("/" + path.name), path.name


def test_the_package_sees_the_schemas_through_its_symlink() -> None:
    link = ROOT / "kubectl_gpu" / "schemas"
    assert link.is_symlink() and link.resolve() == (ROOT / "schemas").resolve()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    [built] = out.glob("kubectl_gpu-*.whl")
    return built


def test_wheel_ships_every_schema_and_the_console_script(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {Path(n).name for n in names if n.startswith("kubectl_gpu/schemas/")}
    assert shipped == {p.name for p in (ROOT / "schemas").glob("*.json")}
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "kubectl-gpu = kubectl_gpu.cli:main" in text


def run_from_zipapp(app: Path, code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` with the archive first on the path and the dependencies after it (-I: no
    environment variables, no user site)."""
    site = [p for p in sys.path if p.endswith("site-packages")]
    prelude = f"import sys; sys.path[:0] = {[str(app), *site]!r}; "
    return subprocess.run(
        [sys.executable, "-I", "-c", prelude + code], capture_output=True, text=True, timeout=60
    )


def test_zipapp_validates_with_schemas_read_from_the_archive(tmp_path: Path) -> None:
    app = tmp_path / "kubectl-gpu"
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_zipapp.py"), str(app)],
        check=True,
        timeout=60,
    )
    assert os.access(app, os.X_OK) and app.read_bytes().startswith(b"#!/usr/bin/env python3")
    origin = run_from_zipapp(app, "import kubectl_gpu; print(kubectl_gpu.__file__)")
    assert origin.stdout.strip().startswith(str(app)), origin.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: v1\nflags:\n  migStrategy: Mixed\n")
    argv = ["kubectl-gpu", "validate", "-o", "json", "-f", str(bad)]
    result = run_from_zipapp(
        app, f"import runpy; sys.argv = {argv!r}; runpy.run_path({str(app)!r}, run_name='__main__')"
    )
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert [f["code"] for f in report["files"][0]["findings"]] == ["sharing.unknown-mig-strategy"]
