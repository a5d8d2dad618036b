"""`.github/workflows/release.yaml`: linted by real linters (zizmor, offline, for security
mistakes; check-jsonschema with the GitHub workflow schema, for shape), and it publishes
exactly what `kubectl gpu install` pulls by default and what krew downloads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubectl_gpu import __version__, bundle
from tests.conftest import ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))
RELEASE = ROOT / ".github" / "workflows" / "release.yaml"
BIN = Path(sys.executable).parent


def lint(*paths: Path) -> list[subprocess.CompletedProcess[str]]:
    zizmor = [str(BIN / "zizmor"), "--offline", "--no-progress", *map(str, paths)]
    schema = [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
              *map(str, paths)]  # fmt: skip
    return [subprocess.run(c, capture_output=True, text=True, timeout=120, check=False)
            for c in (zizmor, schema)]  # fmt: skip


def steps(job: str) -> list[dict[str, Any]]:
    doc = yaml.safe_load(RELEASE.read_text())
    found: list[dict[str, Any]] = doc["jobs"][job]["steps"]
    return found


def test_every_workflow_passes_both_linters() -> None:
    assert WORKFLOWS == [RELEASE]
    for done in lint(*WORKFLOWS):
        assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("mistake", "caught_by"),
    [
        # a tag name pasted into a shell script: template injection
        (
            lambda t: t.replace(
                "TAG: ${{ github.ref_name }}\n        run: |\n          version",
                "TAG: x\n        run: |\n          echo ${{ github.head_ref }}\n          version",
            ),
            0,
        ),
        (lambda t: t.replace("runs-on: ubuntu-24.04", "runs_on: ubuntu-24.04", 1), 1),
    ],
    ids=["template-injection", "misspelt-key"],
)
def test_the_linters_catch_a_broken_workflow(tmp_path: Path, mistake: Any, caught_by: int) -> None:
    broken = tmp_path / ".github" / "workflows" / "release.yaml"
    broken.parent.mkdir(parents=True)
    text = mistake(RELEASE.read_text())
    assert text != RELEASE.read_text()
    broken.write_text(text)
    assert lint(broken)[caught_by].returncode != 0


def test_a_version_tag_pushes_the_image_install_pulls_for_both_architectures() -> None:
    doc = yaml.safe_load(RELEASE.read_text())
    assert doc[True]["push"]["tags"] == ["v*.*.*"]  # YAML 1.1 reads `on` as True
    [build] = [s for s in steps("image") if s.get("uses", "").startswith("docker/build-push")]
    assert build["with"]["push"] is True
    assert set(build["with"]["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert build["with"]["tags"] == "${{ env.IMAGE }}:${{ github.ref_name }}"
    assert doc["env"]["IMAGE"] == bundle.AGENT_IMAGE
    # the tag is checked to be v<__version__>, which is the default image's tag
    assert bundle.Options().agent_image == f"{doc['env']['IMAGE']}:v{__version__}"
    assert doc["jobs"]["image"]["needs"] == "version"
    assert "packages" in doc["jobs"]["image"]["permissions"]


def test_the_krew_job_builds_the_archive_and_checks_plugin_yaml_against_it() -> None:
    runs = [s.get("run", "") for s in steps("krew")]
    assert any("scripts/release.py --vendor pypi" in r and "--manifest plugin.yaml" in r
               for r in runs)  # fmt: skip
    assert any("git diff --exit-code plugin.yaml" in r for r in runs)
    assert any("test_krew_archive_runs_cluster_commands.py" in r for r in runs)
    publish = " ".join(s.get("run", "") for s in steps("publish"))
    assert "kubectl-gpu_*.tar.gz" in publish and "plugin.yaml" in publish
    manifest = yaml.safe_load((ROOT / "plugin.yaml").read_text())
    uri = manifest["spec"]["platforms"][0]["uri"]
    assert uri.endswith(f"/releases/download/v{__version__}/kubectl-gpu_v{__version__}.tar.gz")
