"""krew itself (sigs.k8s.io/krew v0.4.3, built from its Go module by scripts/gobins.py) installs
the archive `scripts/release.py` builds, as the krew index would have it installed, in a
temporary KREW_ROOT: then the real kubectl runs the installed plugin, and `kubectl krew
uninstall gpu` leaves nothing of it behind.

krew's index is a git clone of krew-index; offline, a local git repository holding our
plugin.yaml stands in for it (krew only checks that one is there before `uninstall`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_doctor_names_the_dra_layer import pending_claim
from tests.conftest import ROOT
from tests.kit.cluster import NodeSpec
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import builds

KUBECTL = shutil.which("kubectl")
GIT = shutil.which("git")
pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None or GIT is None, reason="no kubectl or git on PATH"),
    pytest.mark.timeout(600),
]


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The krew binary's directory, and the manifest beside the archive release.py built."""
    try:
        krew_dir = builds.built("krew")
    except builds.NotBuilt as error:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(error))
    root = tmp_path_factory.mktemp("krew-release")
    spec = importlib.util.spec_from_file_location("release", ROOT / "scripts" / "release.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    manifest = root / "plugin.yaml"
    shutil.copyfile(ROOT / "plugin.yaml", manifest)
    try:
        module.build(root / "dist", "pypi", manifest)  # as `make release` builds it
    except subprocess.CalledProcessError as e:
        pytest.skip(f"PyPI unreachable, the vendored wheels could not be fetched: {e}")
    return krew_dir, manifest


def _environment(krew_dir: Path, home: Path) -> dict[str, str]:
    """A fresh KREW_ROOT with a local index, and `python3` without any site-packages."""
    krew_root = home / "krew"
    index = krew_root / "index" / "default"
    (index / "plugins").mkdir(parents=True)
    shutil.copyfile(ROOT / "plugin.yaml", index / "plugins" / "gpu.yaml")
    git = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(home), "PATH": "/usr/bin:/bin"}  # fmt: skip
    for command in (["init", "-q"], ["add", "."], ["commit", "-qm", "index"]):
        subprocess.run([str(GIT), *command], cwd=index, env=git, check=True)
    python = home / "python" / "python3"
    python.parent.mkdir()
    python.write_text(f'#!/bin/sh\nexec "{sys._base_executable}" -I -S "$@"\n')
    python.chmod(0o755)
    path = [krew_root / "bin", krew_dir, python.parent, Path("/usr/bin"), Path("/bin")]
    return {
        "KREW_ROOT": str(krew_root),
        "KREW_NO_UPGRADE_CHECK": "1",
        "HOME": str(home),
        "PATH": os.pathsep.join(map(str, path)),
    }


def kubectl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(KUBECTL), *args], env=env, capture_output=True, text=True, timeout=120,
        check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.fixture
def installed(release: tuple[Path, Path], tmp_path: Path) -> dict[str, str]:
    krew_dir, manifest = release
    env = _environment(krew_dir, tmp_path)
    archive = next((manifest.parent / "dist").glob("*.tar.gz"))
    done = kubectl(env, "krew", "install", f"--manifest={manifest}", f"--archive={archive}")
    assert done.returncode == 0, done.stderr
    assert "Installed plugin: gpu" in done.stderr + done.stdout
    return env


def test_krew_installs_the_archive_and_kubectl_runs_the_plugin(installed: dict[str, str]) -> None:
    krew_root = Path(installed["KREW_ROOT"])
    assert (krew_root / "receipts" / "gpu.yaml").is_file()
    assert os.access(krew_root / "bin" / "kubectl-gpu", os.X_OK)
    helped = kubectl(installed, "gpu", "--help")
    profiles = kubectl(installed, "gpu", "mig", "profiles")
    assert helped.returncode == 0 and "Usage: kubectl gpu" in helped.stdout, helped.stderr
    assert profiles.returncode == 0 and "1g.10gb" in profiles.stdout, profiles.stderr
    for command in ("share", "mig", "map", "validate", "doctor", "install"):
        done = kubectl(installed, "gpu", command, "--help")
        assert done.returncode == 0, (command, done.stderr)
    # cel-python needs compiled modules, so the archive leaves it out and doctor says so
    doctor_help = kubectl(installed, "gpu", "doctor", "--help").stdout
    assert "krew archive cannot" in doctor_help and "cel-python" in doctor_help


def test_cluster_commands_from_the_krew_install_run_against_the_simulated_cluster(
    installed: dict[str, str], sim_cluster: MakeSimCluster
) -> None:
    configs = {"ts": "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
               "    - name: nvidia.com/gpu\n      replicas: 4\n"}  # fmt: skip
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)], "helm", configs=configs,
                          default_config="ts")  # fmt: skip
    base = ("gpu", "--kubeconfig", str(cluster.kubeconfig))
    for command in (("share", "show"), ("map",), ("doctor",), ("mig", "status")):
        done = kubectl(installed, *base, *command)
        assert "needs the Python package" not in done.stderr, (command, done.stderr)
        assert "Traceback" not in done.stderr, (command, done.stderr)
        assert done.returncode in (0, 1), (command, done.returncode, done.stderr)
        if command != ("doctor",):
            assert done.returncode == 0, (command, done.stderr)
            assert "gpu-a" in done.stdout + done.stderr, command

    # a pod waiting on a DRA claim: the archive carries no cel-python, so doctor tells a krew
    # user to install cel-python alone, never the `dra` extra (a second copy of the plugin)
    cluster.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    pending_claim(cluster.store, "v1")
    done = kubectl(installed, *base, "doctor", "train", "-n", "ml", "-o", "json")
    assert "Traceback" not in done.stderr, done.stderr
    fixes = [d["fix"] for d in json.loads(done.stdout)["diagnoses"] if d["layer"] == "dra"]
    assert any("-m pip install --user 'cel-python" in fix for fix in fixes), fixes
    assert not any("kubectl-gpu[" in fix for fix in fixes), fixes


def test_krew_uninstall_leaves_nothing_of_the_plugin(installed: dict[str, str]) -> None:
    done = kubectl(installed, "krew", "uninstall", "gpu")
    assert done.returncode == 0, done.stderr
    krew_root = Path(installed["KREW_ROOT"])
    left = [p for p in krew_root.rglob("*") if "gpu" in p.name and "index" not in p.parts]
    assert left == []
    assert kubectl(installed, "gpu", "--help").returncode != 0
