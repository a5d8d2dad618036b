"""The krew archive as `make release` builds it (dependencies vendored from PyPI), extracted and
run by a Python with no site-packages at all (`python3 -S -I`): every command works, the ones
that talk to the cluster included, against the simulated cluster, importing only the parts of
the Kubernetes client they use.

This is the one test that reaches PyPI (pip fetches the pinned wheels, as the release does);
it is skipped, saying so, where PyPI cannot be reached.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.kit.cluster import NodeSpec
from tests.kit.cluster.fixture import MakeSimCluster

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("krew-pypi")
    spec = importlib.util.spec_from_file_location("release", ROOT / "scripts" / "release.py")
    assert spec and spec.loader
    release = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(release)
    try:
        archive = release.build(root / "dist", "pypi", None)
    except subprocess.CalledProcessError as e:
        pytest.skip(f"PyPI unreachable, the vendored wheels could not be fetched: {e}")
    with tarfile.open(archive) as tar:
        tar.extractall(root / "out", filter="tar")
    return root / "out" / "kubectl-gpu"


def run(app: Path, *args: str, python: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    # the archive unpacks itself into the user's cache: beside it here, not in this HOME
    env = {**os.environ, "XDG_CACHE_HOME": str(app.parent / "cache")}
    return subprocess.run(
        [sys._base_executable, "-S", "-I", *python, str(app), *args],  # type: ignore[attr-defined]
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip


def test_the_archive_vendors_no_compiled_module(app: Path) -> None:
    import io
    import zipfile

    with zipfile.ZipFile(app) as archive:
        payload = zipfile.ZipFile(io.BytesIO(archive.read("payload.zip")))
    names = payload.namelist()
    assert not [n for n in names if n.endswith((".so", ".pyd", ".dylib"))]
    assert "kubernetes/client/api_client.py" in names


def test_share_show_and_map_run_against_the_cluster_without_site_packages(
    app: Path, sim_cluster: MakeSimCluster
) -> None:
    configs = {"ts": "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
               "    - name: nvidia.com/gpu\n      replicas: 4\n"}  # fmt: skip
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)], "helm", configs=configs,
                          default_config="ts")  # fmt: skip
    base = ("--kubeconfig", str(cluster.kubeconfig))

    shown = run(app, *base, "share", "show")
    mapped = run(app, *base, "map", python=("-X", "importtime"))

    assert shown.returncode == 0, shown.stderr
    assert "gpu-a" in shown.stdout and "needs the Python package" not in shown.stderr
    assert mapped.returncode == 0, mapped.stderr
    assert "gpu-a" in mapped.stdout + mapped.stderr
    # kubernetes 35's package __init__s import its 790 API and model modules (0.4-1 s a
    # command); the release rewrites them to import a name on first use (scripts/release.py)
    client = [m for m in imported(mapped.stderr) if m.startswith("kubernetes.")]
    assert "kubernetes.client.api_client" in client
    assert not [
        m for m in client if m.startswith(("kubernetes.client.models.", "kubernetes.client.api."))
    ]
    assert len(client) < 40, client


def imported(importtime: str) -> list[str]:
    """The modules a `python -X importtime` run imported, from its stderr."""
    return [line.rsplit("|", 1)[1].strip() for line in importtime.splitlines()
            if line.startswith("import time:") and "|" in line]  # fmt: skip


def test_validate_runs_with_the_vendored_jsonschema(app: Path, tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                      "    - name: nvidia.com/gpu\n      replicas: 1\n")  # fmt: skip
    done = run(app, "validate", "-f", str(config))
    assert done.returncode == 1 and "replicas" in done.stdout + done.stderr, done.stderr
    assert "Traceback" not in done.stderr
