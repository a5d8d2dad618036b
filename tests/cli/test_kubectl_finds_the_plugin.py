"""The real kubectl binary dispatches `kubectl gpu` to our entry point."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.kubectl
KUBECTL = shutil.which("kubectl")


@pytest.fixture
def plugin_path(tmp_path: Path) -> dict[str, str]:
    if KUBECTL is None:
        if os.environ.get("KUBECTL_GPU_REQUIRE_KUBECTL"):
            pytest.fail("kubectl is required here (KUBECTL_GPU_REQUIRE_KUBECTL) but not on PATH")
        pytest.skip("no kubectl binary on PATH")
    entry = Path(sys.executable).parent / "kubectl-gpu"
    assert entry.exists(), "the console script is not installed (pip install -e .)"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl-gpu").symlink_to(entry)
    # kubectl reads no cluster for these commands; keep it away from the user's config.
    return {
        "PATH": f"{bin_dir}{os.pathsep}{Path(KUBECTL).parent}",
        "KUBECONFIG": str(tmp_path / "none"),
        "HOME": str(tmp_path),
    }


def kubectl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run([KUBECTL, *args], env=env, capture_output=True, text=True, timeout=60)


def test_kubectl_gpu_help_runs_our_cli(plugin_path: dict[str, str]) -> None:
    result = kubectl(plugin_path, "gpu", "--help")
    assert result.returncode == 0, result.stderr
    assert "Usage: kubectl gpu [OPTIONS] COMMAND" in result.stdout
    assert "validate" in result.stdout


def test_kubectl_plugin_list_finds_kubectl_gpu(plugin_path: dict[str, str]) -> None:
    result = kubectl(plugin_path, "plugin", "list")
    assert "kubectl-gpu" in result.stdout, result.stdout + result.stderr


def test_kubectl_passes_arguments_and_exit_code_through(
    plugin_path: dict[str, str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: v2\n")
    result = kubectl(plugin_path, "gpu", "validate", "-f", str(bad))
    assert result.returncode == 1
    assert f"{bad}:1:10: error:" in result.stdout
