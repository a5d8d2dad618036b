"""Every program the kit runs (Kubernetes' own, etcd, KWOK, NVIDIA's node programs, NFD's master,
the NVML library) is found in scripts/gobins.py's cache through one lookup; on a machine where
one is not built and cannot be built (no Go here), starting the plane or a node program fails
with one wording: what is missing, where it was looked for, why, and the command that builds
it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit.kube import builds
from tests.kit.plane.plane import ControlPlane

PROGRAMS = [
    ("nvidia-device-plugin", None),
    ("gpu-feature-discovery", None),
    ("nfd-master", None),
    ("gpu-kubelet-plugin", None),
    ("libnvidia-ml.so.1", "libnvml"),
    ("etcd", None),
]


@pytest.fixture
def bare_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache and no Go on PATH: nothing is built and nothing can be."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("KUBECTL_GPU_CACHE", str(cache))
    monkeypatch.setenv("PATH", str(tmp_path / "no-go"))
    monkeypatch.setattr(builds, "_found", {})  # what this process found earlier is not here
    return cache


@pytest.mark.parametrize(("name", "target"), PROGRAMS)
def test_a_node_program_not_built_names_the_command_that_builds_it(
    bare_machine: Path, name: str, target: str | None
) -> None:
    with pytest.raises(builds.NotBuilt) as caught:
        builds.program(name, target)
    message = str(caught.value)
    built_by = target or name
    assert message.startswith(f"{built_by} is not built in {bare_machine / 'gobin'}")
    assert "Go is not on PATH" in message  # why: gobins' own reason
    assert message.endswith(f"python3 scripts/gobins.py {built_by}")


def test_a_plane_whose_kubernetes_is_not_built_says_so_before_starting_anything(
    bare_machine: Path, tmp_path: Path
) -> None:
    plane = ControlPlane("1.37", directory=tmp_path / "plane")
    with pytest.raises(builds.NotBuilt, match=r"python3 scripts/gobins.py kubernetes-1.37$"):
        plane.start()
    assert plane.components == []


def test_a_name_its_target_does_not_build_is_named_too() -> None:
    with pytest.raises(builds.NotBuilt, match="its build makes no kwok-typo"):
        builds.program("kwok-typo", "kwok")
