"""The agent image's filesystem, built the way the Dockerfile builds it, runs the agent.

No container engine runs here, so the Dockerfile's build stage is carried out step by step
into a directory: its ENV, WORKDIR and COPY instructions, and each RUN command as written, with
the image's paths mapped into that directory and this machine's Python (the same minor version
as the pinned base image, which adds no distribution packages) standing in for the base. Then
the runtime stage's entry point, `kubectl-gpu-agent`, must answer `--version` and the probes'
`--check-health` from that filesystem. A broken Dockerfile step fails here.

It reaches PyPI (pip installs the package's `agent` extra, as the image build does).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kubectl_gpu import __version__
from tests.conftest import ROOT

pytestmark = pytest.mark.timeout(900)
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def instructions(stage: int) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of one build stage, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    lines = [line.strip() for line in text.splitlines() if line.strip()
             and not line.lstrip().startswith("#")]  # fmt: skip
    stages: list[list[tuple[str, str]]] = [[]]
    for line in lines:
        word, _, rest = line.partition(" ")
        if word == "FROM":
            stages.append([])
        stages[-1].append((word, rest.strip()))
    return stages[stage + 1]


@pytest.fixture(scope="module")
def rootfs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    [base] = re.findall(r"(?m)^ARG PYTHON_IMAGE=python:(\d+\.\d+)", DOCKERFILE)
    if f"{sys.version_info[0]}.{sys.version_info[1]}" != base:
        pytest.skip(f"the image's base is Python {base}; this machine's is {sys.version[:4]}")
    root = tmp_path_factory.mktemp("rootfs")
    env = {"PATH": f"{_python_dir(root)}:/usr/bin:/bin", "HOME": str(root)}
    workdir = root
    for word, args in instructions(0):
        args = args.replace("/opt/", f"{root}/opt/")
        if word == "ENV":
            env.update(dict(pair.split("=", 1) for pair in args.split()))
            env.pop("PIP_NO_CACHE_DIR", None)  # the cache changes speed, not what is installed
        elif word == "WORKDIR":
            workdir = root / args.lstrip("/")
            workdir.mkdir(parents=True, exist_ok=True)
        elif word == "COPY":
            *sources, target = args.split()
            for source in sources:
                _copy(ROOT / source, workdir / target, source.endswith("/"))
        elif word == "RUN":
            command = ["bash", "-c", args]
            done = subprocess.run(
                command, cwd=workdir, env=env, capture_output=True, text=True, timeout=800
            )
            if done.returncode and "Could not find a version" in done.stderr + done.stdout:
                pytest.skip(f"PyPI unreachable: {done.stderr[-500:]}")
            assert done.returncode == 0, f"RUN {args}\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    return root / "opt" / "kubectl-gpu"


def _python_dir(root: Path) -> Path:
    """`python`, as the base image has it: this interpreter, outside any virtual environment."""
    bin_dir = root / "base-bin"
    bin_dir.mkdir(exist_ok=True)
    link = bin_dir / "python"
    if not link.exists():
        link.symlink_to(sys._base_executable)  # type: ignore[attr-defined]
    return bin_dir


def _copy(source: Path, target: Path, is_dir: bool) -> None:
    if is_dir:
        shutil.copytree(source, target, symlinks=False, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))  # fmt: skip
    else:
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target / source.name)


def agent(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    runtime = dict(pair.split("=", 1) for word, rest in instructions(1) if word == "ENV"
                   for pair in rest.split())  # fmt: skip
    env = {**{k: v for k, v in runtime.items() if k != "PATH"}, "PATH": f"{venv}/bin:/usr/bin:/bin"}
    return subprocess.run([str(venv / "bin" / "kubectl-gpu-agent"), *args], env=env,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


def test_the_entry_point_says_its_version(rootfs: Path) -> None:
    done = agent(rootfs, "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"kubectl-gpu-agent {__version__}"


def test_the_probes_command_runs_from_the_image(rootfs: Path, tmp_path: Path) -> None:
    beat = tmp_path / "heartbeat"
    missing = agent(rootfs, "--check-health", "--heartbeat", str(beat), "--max-age", "120")
    assert missing.returncode == 1 and "no pass has finished yet" in missing.stderr
    beat.touch()
    fresh = agent(rootfs, "--check-health", "--heartbeat", str(beat), "--max-age", "120")
    assert fresh.returncode == 0, fresh.stderr


def test_the_image_carries_nvml_bindings_and_compiled_bytecode(rootfs: Path) -> None:
    site = next((rootfs / "lib").glob("python3*/site-packages"))
    assert (site / "pynvml.py").exists()
    assert list((site / "kubectl_gpu" / "__pycache__").glob("*.pyc"))  # compileall ran
    assert os.access(rootfs / "bin" / "kubectl-gpu-agent", os.X_OK)
