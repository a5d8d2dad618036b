"""`make release` from a fresh clone yields the archive plugin.yaml records, on any day.

The vendored dependencies come only from tools/release/vendor.lock, each pinned to one version
and one wheel by its sha256, so a newer release on PyPI cannot change the archive. The build
tests reach PyPI (as `make release` does) and are skipped, saying so, where it cannot be reached.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import subprocess
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def release() -> ModuleType:
    spec = importlib.util.spec_from_file_location("release", ROOT / "scripts" / "release.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("line", "refusal"),
    [
        ("click>=8.1 \\\n    --hash=sha256:" + "0" * 64, "must not float"),
        ("click \\\n    --hash=sha256:" + "0" * 64, "must not float"),
        ("rich==14.0.0", "no --hash=sha256 for rich"),
        ("click==8.5.1 --hash=md5:abc", "is not a --hash=sha256"),
    ],
)
def test_a_dependency_that_could_float_is_refused(
    release: ModuleType, tmp_path: Path, line: str, refusal: str
) -> None:
    lock = tmp_path / "vendor.lock"
    lock.write_text(release.LOCK.read_text() + line + "\n")
    with pytest.raises(release.LockError, match=refusal):
        release.locked(lock)


def test_the_lock_pins_every_package_the_archive_may_import(release: ModuleType) -> None:
    pins = {name.lower(): version for name, version in release.locked().items()}
    wanted = {d.lower() for d in release.MODULE_DISTRIBUTIONS.values()} | {
        p.lower() for p in release.PURE
    }
    assert wanted <= set(pins)


def _build(release: ModuleType, dist: Path) -> Path:
    try:
        return release.build(dist, "pypi", None)
    except subprocess.CalledProcessError as e:
        pytest.skip(f"PyPI unreachable, the vendored wheels could not be fetched: {e}")


@pytest.mark.timeout(300)
def test_two_builds_from_the_lock_are_the_same_bytes_with_the_locked_versions(
    release: ModuleType, tmp_path: Path
) -> None:
    first = _build(release, tmp_path / "one")
    second = _build(release, tmp_path / "two")
    assert first.read_bytes() == second.read_bytes()
    import tarfile

    with tarfile.open(first) as tar:
        tar.extractall(tmp_path / "out", filter="tar")
    with zipfile.ZipFile(tmp_path / "out" / "kubectl-gpu") as outer:
        assert outer.namelist() == ["__main__.py", "payload.zip"]
        app = zipfile.ZipFile(io.BytesIO(outer.read("payload.zip")))
        vendored = {
            n.split("/")[0].removesuffix(".dist-info").rsplit("-", 1)[0].lower().replace("_", "-"):
            n.split("/")[0].removesuffix(".dist-info").rsplit("-", 1)[1]
            for n in app.namelist()
            if n.split("/")[0].endswith(".dist-info")
        }  # fmt: skip
    pins = {name.lower(): version for name, version in release.locked().items()}
    assert vendored == pins


@pytest.mark.timeout(300)
def test_check_names_the_mismatch_and_the_fix(
    release: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "plugin.yaml"
    manifest.write_text((ROOT / "plugin.yaml").read_text())
    release.update_manifest(manifest, "v0.0.0", "https://example.invalid/a.tar.gz", "0" * 64)
    try:
        code = release.check(tmp_path / "dist", "pypi", manifest)
    except subprocess.CalledProcessError as e:
        pytest.skip(f"PyPI unreachable, the vendored wheels could not be fetched: {e}")
    built = hashlib.sha256(next((tmp_path / "dist").glob("*.tar.gz")).read_bytes()).hexdigest()
    assert code == 1
    err = capsys.readouterr().err
    assert f"records sha256 {'0' * 64}" in err and built in err and "make release" in err
