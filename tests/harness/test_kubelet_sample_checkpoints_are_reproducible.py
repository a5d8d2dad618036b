"""The checkpoint files in tests/data/checkpoints/ are what their README says they are."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit.node import kubelet

DATA = Path(__file__).resolve().parents[1] / "data" / "checkpoints"
REPO = Path(__file__).resolve().parents[2]
SHARED_FIXTURE = REPO.parent / "shared" / "fixtures" / "checkpoints" / "minikube-1gpu.json"


@pytest.mark.parametrize("name", sorted(kubelet.SAMPLES))
def test_generated_sample_matches_the_stand_in(name: str) -> None:
    assert (DATA / name).read_text(encoding="utf-8") == kubelet.sample_text(name)


@pytest.mark.skipif(not SHARED_FIXTURE.exists(), reason="shared fixtures are not on this machine")
def test_minikube_checkpoint_is_an_unchanged_copy_of_the_real_fixture() -> None:
    assert (DATA / "minikube-1gpu.json").read_bytes() == SHARED_FIXTURE.read_bytes()


def test_every_file_is_documented() -> None:
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    files = sorted(p.name for p in DATA.glob("*.json"))

    assert files == sorted([*kubelet.SAMPLES, "minikube-1gpu.json"])
    assert all(f"`{name}`" in readme for name in files)
