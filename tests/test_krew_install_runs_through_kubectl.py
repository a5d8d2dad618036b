"""The release archive installed the way krew installs it, then run by the real kubectl with a
Python that has nothing but its standard library (`-I -S`: no site-packages at all).

krew: sniff the download (gzip), check its sha256 against the manifest, extract keeping the
archive's modes, move each `files` entry into the install dir, require a LICENSE, and link
`kubectl-<name>` to `bin` in a PATH directory (docs/upstream-facts.md N6.1-N6.3).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

KUBECTL = shutil.which("kubectl")
pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="no kubectl on PATH"),
]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Build (vendoring from this environment, offline), install like krew; the env to run in."""
    root = tmp_path_factory.mktemp("krew")
    spec = importlib.util.spec_from_file_location("release", ROOT / "scripts" / "release.py")
    assert spec and spec.loader
    release = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(release)
    manifest = root / "plugin.yaml"
    shutil.copyfile(ROOT / "plugin.yaml", manifest)
    archive = release.build(root / "dist", "venv", manifest)
    platform = yaml.safe_load(manifest.read_text())["spec"]["platforms"][0]
    return {"PATH": _install(archive, platform, root), "HOME": str(root)}


def _install(archive: Path, platform: dict[str, object], root: Path) -> str:
    data = archive.read_bytes()
    assert data[:2] == b"\x1f\x8b", "krew accepts only zip or gzip content"
    assert hashlib.sha256(data).hexdigest() == platform["sha256"]
    staging, target, bin_dir = root / "staging", root / "store" / "gpu", root / "bin"
    with tarfile.open(archive) as tar:
        tar.extractall(staging, filter="tar")  # keeps the archive's modes, refuses escapes
    target.mkdir(parents=True)
    for move in platform["files"]:  # type: ignore[attr-defined]
        for found in staging.glob(move["from"]):
            shutil.move(str(found), target / move["to"] / found.name)
    assert [p.name for p in target.iterdir() if p.name.upper().startswith("LICENSE")]
    bin_dir.mkdir()
    (bin_dir / "kubectl-gpu").symlink_to(target / str(platform["bin"]))
    # `python3` for the shebang: this interpreter without any site-packages.
    python = root / "python" / "python3"
    python.parent.mkdir()
    python.write_text(f'#!/bin/sh\nexec "{sys._base_executable}" -I -S "$@"\n')
    python.chmod(0o755)
    return os.pathsep.join([str(bin_dir), str(python.parent), "/usr/bin", "/bin"])


def kubectl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(KUBECTL), *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_the_archive_keeps_the_executable_bit(installed: dict[str, str]) -> None:
    link = Path(installed["PATH"].split(os.pathsep)[0]) / "kubectl-gpu"
    assert os.access(link.resolve(), os.X_OK)
    assert link.resolve().read_bytes().startswith(b"#!/usr/bin/env python3\n")


def test_python_reads_a_zip_directory_of_two_entries_before_each_command(
    installed: dict[str, str],
) -> None:
    # Python parses a zipapp's whole central directory before it runs the entry: the package
    # and its dependencies are one stored entry, unpacked into the cache once
    import zipfile

    link = Path(installed["PATH"].split(os.pathsep)[0]) / "kubectl-gpu"
    with zipfile.ZipFile(link.resolve()) as app:
        assert app.namelist() == ["__main__.py", "payload.zip"]
        assert app.getinfo("payload.zip").compress_type == zipfile.ZIP_STORED


def test_kubectl_gpu_help_runs_through_the_real_kubectl(installed: dict[str, str]) -> None:
    done = kubectl(installed, "gpu", "--help")
    assert done.returncode == 0, done.stderr
    assert "Usage: kubectl gpu" in done.stdout and "install" in done.stdout


def test_an_offline_command_works_with_only_the_standard_library(
    installed: dict[str, str],
) -> None:
    done = kubectl(installed, "gpu", "mig", "profiles")
    assert done.returncode == 0, done.stderr
    assert "1g.10gb" in done.stdout


def test_a_cluster_command_names_the_package_it_needs(installed: dict[str, str]) -> None:
    done = kubectl(installed, "gpu", "map")
    assert done.returncode == 1
    assert "needs the Python package kubernetes" in done.stderr
    assert "pip install --user 'kubernetes>=30'" in done.stderr
    assert "Traceback" not in done.stderr


def test_validate_names_jsonschema_when_it_was_not_vendored(
    installed: dict[str, str], tmp_path: Path
) -> None:
    # A document our compiled schema check passes needs no jsonschema; one it refuses does,
    # to find and word every error. vendor=venv leaves jsonschema out (rpds-py is compiled);
    # `make release` vendors 4.17.3.
    valid, invalid = tmp_path / "valid.yaml", tmp_path / "invalid.yaml"
    valid.write_text("version: v1\n")
    invalid.write_text("version: v1\nflags: {migStrategy: sometimes}\n")

    assert kubectl(installed, "gpu", "validate", "-f", str(valid)).returncode == 0
    done = kubectl(installed, "gpu", "validate", "-f", str(invalid))
    assert done.returncode == 1, done.stderr
    assert "needs the Python package jsonschema" in done.stderr


def cache_of(installed: dict[str, str]) -> Path:
    [found] = (Path(installed["HOME"]) / ".cache" / "kubectl-gpu").glob("app-*")
    return found


def test_the_archive_runs_unpacked_from_the_user_cache_keeping_bytecode(
    installed: dict[str, str],
) -> None:
    # A zip holds no bytecode every Python can use: unpacked once, the modules compile once.
    assert kubectl(installed, "gpu", "mig", "profiles").returncode == 0
    unpacked = cache_of(installed)
    compiled = sorted((unpacked / "kubectl_gpu" / "mig" / "__pycache__").glob("*.pyc"))
    assert compiled, "the modules imported were compiled into the cache"
    assert oct(unpacked.stat().st_mode & 0o777) == "0o700"
    stamps = {p: p.stat().st_mtime_ns for p in compiled}

    again = kubectl(installed, "gpu", "mig", "profiles")

    assert again.returncode == 0 and "1g.10gb" in again.stdout
    assert {p: p.stat().st_mtime_ns for p in compiled} == stamps  # read, not compiled again
    assert cache_of(installed) == unpacked


def test_without_a_usable_cache_the_archive_runs_as_it_is(
    installed: dict[str, str], tmp_path: Path
) -> None:
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    shared = tmp_path / "shared"
    (shared / "kubectl-gpu").mkdir(parents=True)
    (shared / "kubectl-gpu").chmod(0o777)  # others could plant code there: not used

    temporary = tmp_path / "tmp"
    temporary.mkdir()

    for cache in (blocked, shared):
        env = {**installed, "XDG_CACHE_HOME": str(cache), "TMPDIR": str(temporary)}
        done = kubectl(env, "gpu", "mig", "profiles")
        assert done.returncode == 0, done.stderr
        assert "1g.10gb" in done.stdout and "Traceback" not in done.stderr
    assert list((shared / "kubectl-gpu").iterdir()) == []
    assert list(temporary.iterdir()) == []  # the payload's temporary copy is gone
