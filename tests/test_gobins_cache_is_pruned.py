"""scripts/gobins.py: a new build removes the same target's builds nobody used for weeks, and
keeps everything else (the build in use, recent ones another clone may use, other targets)."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import pytest

from scripts import gobins

DAY = 86400


def _build_dir(root: Path, name: str, age_days: float) -> Path:
    directory = root / name
    directory.mkdir()
    (directory / "kube-apiserver").write_text("binary")
    (root / f"{name}.lock").write_text("")
    stamp = time.time() - age_days * DAY
    os.utime(directory, (stamp, stamp))
    return directory


def test_a_new_build_removes_only_stale_builds_of_its_own_target(tmp_path: Path) -> None:
    target = gobins.resolve("kubernetes-1.37")
    current = _build_dir(tmp_path, "kubernetes-1.37-0123456789abcdef", 0)
    stale = _build_dir(tmp_path, "kubernetes-1.37-fedcba9876543210", gobins.STALE_DAYS + 1)
    recent = _build_dir(tmp_path, "kubernetes-1.37-00000000000000aa", gobins.STALE_DAYS - 1)
    other_release = _build_dir(tmp_path, "kubernetes-1.34-fedcba9876543210", 400)
    other_target = _build_dir(tmp_path, "etcd-fedcba9876543210", 400)

    removed = gobins.prune(target, keep=current, quiet=True)

    assert removed == [stale]
    assert not stale.exists() and not (tmp_path / f"{stale.name}.lock").exists()
    for kept in (current, recent, other_release, other_target):
        assert (kept / "kube-apiserver").is_file(), kept.name


def test_each_release_of_kubernetes_builds_under_its_own_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two releases' builds must not wait on one lock (`with_suffix` made both `kubernetes-1`)."""
    monkeypatch.setenv("KUBECTL_GPU_CACHE", str(tmp_path))
    locks: list[str] = []
    real_locked = gobins._locked

    def recording(path: Path) -> contextlib.AbstractContextManager[None]:
        locks.append(path.name)
        return real_locked(path)

    def build(go: str, target: gobins.Target, directory: Path, *, quiet: bool) -> None:
        directory.mkdir()  # no Go build here: the lock is what is checked

    monkeypatch.setattr(gobins, "_go", lambda: "go")
    monkeypatch.setattr(gobins, "_go_version", lambda go: "go1.26")
    monkeypatch.setattr(gobins, "_build", build)
    monkeypatch.setattr(gobins, "_locked", recording)
    for release in ("kubernetes-1.37", "kubernetes-1.34"):
        gobins.ensure(release, quiet=True)
    assert len(set(locks)) == 2, locks
    assert all(name.startswith(("kubernetes-1.37-", "kubernetes-1.34-")) for name in locks)
