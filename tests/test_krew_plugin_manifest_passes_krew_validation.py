"""plugin.yaml against every rule krew and krew-index CI enforce (docs/upstream-facts.md N6.2),
and `make release`'s archive: reproducible, its sha256 and version written into the manifest."""

from __future__ import annotations

import hashlib
import importlib.util
import re
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from kubectl_gpu import __version__
from tests.conftest import ROOT

MANIFEST = ROOT / "plugin.yaml"
SUPPORTED = {
    "windows": {"386", "amd64", "arm64"},
    "linux": {"386", "amd64", "arm", "arm64", "ppc64le"},
    "darwin": {"386", "amd64", "arm64"},
}
WINDOWS_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)),
                    *(f"LPT{i}" for i in range(1, 10))}  # fmt: skip
# k8s.io/apimachinery/pkg/util/version ParseSemantic, after krew's own "must start with v".
SEMVER = re.compile(
    r"^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$"
)


def load_release() -> ModuleType:
    spec = importlib.util.spec_from_file_location("release", ROOT / "scripts" / "release.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def problems(path: Path) -> list[str]:
    """Every krew validation rule that `path` breaks (empty: krew would accept it)."""
    doc = yaml.safe_load(path.read_text())
    spec = doc.get("spec") or {}
    name = (doc.get("metadata") or {}).get("name", "")
    found = []
    if doc.get("apiVersion") != "krew.googlecontainertools.github.com/v1alpha2":
        found.append("apiVersion")
    if doc.get("kind") != "Plugin":
        found.append("kind")
    if not re.match(r"^[\w-]+$", name) or name.upper() in WINDOWS_RESERVED:
        found.append("name")
    # krew-index keeps it as plugins/<name>.yaml; this repository calls it plugin.yaml.
    if path.suffix != ".yaml" or (path.stem != name and path.name != "plugin.yaml"):
        found.append("file name")
    short = spec.get("shortDescription", "")
    if not short or "\n" in short or "\r" in short or len(short) > 50:
        found.append("shortDescription")
    description = spec.get("description", "")
    if not description or any(len(line) > 80 for line in description.splitlines()):
        found.append("description")
    if not SEMVER.match(str(spec.get("version", ""))):
        found.append("version")
    found += _platform_problems(spec.get("platforms") or [])
    return found


def _platform_problems(platforms: list[dict[str, Any]]) -> list[str]:
    found = [] if platforms else ["no platforms"]
    selected: list[tuple[str, str]] = []
    for i, platform in enumerate(platforms):
        if not platform.get("uri") or not platform.get("bin"):
            found.append(f"platform {i}: uri/bin")
        if not re.match(r"^[a-f0-9]{64}$", str(platform.get("sha256", ""))):
            found.append(f"platform {i}: sha256")
        files = platform.get("files")
        if files is not None and (not files or any(not f.get("from") or not f.get("to")
                                                   for f in files)):  # fmt: skip
            found.append(f"platform {i}: files")
        selector = platform.get("selector") or {}
        labels = selector.get("matchLabels")
        if not selector or set(selector) - {"matchLabels", "matchExpressions"} or labels == {}:
            found.append(f"platform {i}: selector")
            continue
        if "matchExpressions" in selector or set(labels or {}) - {"os", "arch"}:
            found.append(f"platform {i}: selector keys")
            continue
        matches = [(o, a) for o, arches in SUPPORTED.items() for a in arches
                   if labels.get("os", o) == o and labels.get("arch", a) == a]  # fmt: skip
        if not matches:
            found.append(f"platform {i}: selects no supported os/arch")
        found += [f"{o}/{a} selected twice" for o, a in matches if (o, a) in selected]
        selected += matches
    return found


def test_plugin_yaml_breaks_no_krew_rule() -> None:
    assert problems(MANIFEST) == []


def test_the_validator_catches_what_krew_rejects(tmp_path: Path) -> None:
    doc = yaml.safe_load(MANIFEST.read_text())
    doc["spec"]["version"] = "0.1.0"
    doc["spec"]["platforms"][0]["sha256"] = "ABC"
    doc["spec"]["platforms"][1]["selector"] = dict(doc["spec"]["platforms"][0]["selector"])
    bad = tmp_path / "plugin.yaml"
    bad.write_text(yaml.safe_dump(doc))
    found = problems(bad)
    assert "version" in found and "platform 0: sha256" in found
    assert any("selected twice" in p for p in found)


def test_linux_and_darwin_on_amd64_and_arm64_each_get_the_zipapp_and_licence() -> None:
    doc = yaml.safe_load(MANIFEST.read_text())
    assert doc["metadata"]["name"] == "gpu"
    platforms = doc["spec"]["platforms"]
    pairs = {(p["selector"]["matchLabels"]["os"], p["selector"]["matchLabels"]["arch"])
             for p in platforms}  # fmt: skip
    assert pairs == {(o, a) for o in ("linux", "darwin") for a in ("amd64", "arm64")}
    for platform in platforms:
        assert platform["uri"].endswith(".tar.gz") and platform["bin"] == "kubectl-gpu"
        assert {f["from"] for f in platform["files"]} == {"kubectl-gpu", "LICENSE"}


def test_the_manifest_version_is_the_package_version_and_caveats_name_python() -> None:
    spec = yaml.safe_load(MANIFEST.read_text())["spec"]
    assert spec["version"] == f"v{__version__}"
    assert "python3" in spec["caveats"] and "3.10" in spec["caveats"]


@pytest.fixture(scope="module")
def release() -> ModuleType:
    return load_release()


def test_release_builds_the_same_bytes_twice_and_writes_them_into_the_manifest(
    release: ModuleType, tmp_path: Path
) -> None:
    manifest = tmp_path / "plugin.yaml"
    shutil.copyfile(MANIFEST, manifest)
    # vendor=venv: tests never reach PyPI; `make release` uses vendor=pypi.
    first = release.build(tmp_path / "a", "venv", manifest)
    second = release.build(tmp_path / "b", "venv", None)
    assert first.read_bytes() == second.read_bytes()
    assert first.read_bytes()[:2] == b"\x1f\x8b"  # sniffed as application/x-gzip by krew
    digest = hashlib.sha256(first.read_bytes()).hexdigest()
    spec = yaml.safe_load(manifest.read_text())["spec"]
    assert {p["sha256"] for p in spec["platforms"]} == {digest}
    assert spec["version"] == f"v{__version__}"
    assert all(p["uri"].endswith(f"/v{__version__}/{first.name}") for p in spec["platforms"])
    assert (tmp_path / "a" / f"{first.name}.sha256").read_text().split()[0] == digest
    assert problems(manifest) == []
    assert manifest.read_text().startswith("# krew manifest")  # comments survive the rewrite
