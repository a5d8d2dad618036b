"""One node's GPU state in a file, shared by every process on a simulated node (test code only).

On a real node the GPUs' state lives in the driver, so the device plugin, the node agent and
``nvidia-smi`` — separate processes — all see one truth. The simulated node keeps that truth in a
JSON file: each Python process holds a ``FakeLibNvml`` and, under an exclusive ``flock``, reloads
it when another process changed the file and writes it back after a call that changes GPU state.
The node's C library, libnvidia-ml.so.1 (tests/kit/node/libnvml/c, docs/simulated-nvml.md), reads
and writes the same file under the same lock and keeps this format, so a change to the format
is a change to both.

Owns: the file format (the library's ``snapshot`` plus the MIG UUID counter, whether the driver was
lost, and a generation number), ``save``/``refresh`` (restoring into the existing ``Gpu`` objects,
so handles to whole GPUs stay valid while handles to instances that no longer exist go stale, as
after a reset), the lock, and ``SyncedView``, the library view a Python process running an agent
in-process over the stand-in installs as pynvml's library (benchmarks/agent_burst.py). Must not:
hold NVML behaviour (the other modules of this package).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.kit.node.libnvml.device import Gpu, Process
from tests.kit.node.libnvml.instances import ComputeInstance, GpuInstance
from tests.kit.node.libnvml.library import CSymbol, FakeLibNvml, LibraryView
from tests.kit.node.libnvml.models import Placement, compute_profiles

# NVML calls after which the GPUs are no longer what the file says.
_CHANGING = ("Set", "Create", "Destroy", "Reset")


class GpuStateFile:
    """The file holding one node's GPU state; ``generation`` is what this process last saw."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock_path = path.with_name(path.name + ".lock")
        self.generation = -1

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive use of the GPUs across processes (threads use the library's own lock)."""
        with open(self.lock_path, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def save(self, lib: FakeLibNvml) -> None:
        """Write the library's state as the next generation (call while locked)."""
        document = _document(lib)
        document["generation"] = max(self.generation, self._stored_generation()) + 1
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(document))
        os.replace(tmp, self.path)
        self.generation = document["generation"]

    def refresh(self, lib: FakeLibNvml) -> bool:
        """Load the file into ``lib`` if another process wrote a newer generation (locked)."""
        try:
            document = json.loads(self.path.read_text())
        except FileNotFoundError:
            return False
        if document["generation"] == self.generation:
            return False
        _restore(lib, document)
        self.generation = document["generation"]
        return True

    def _stored_generation(self) -> int:
        try:
            return int(json.loads(self.path.read_text())["generation"])
        except (FileNotFoundError, ValueError, KeyError):
            return -1


class SyncedView(LibraryView):
    """pynvml's library for a process on a simulated node: every call sees the shared state."""

    def __init__(self, lib: FakeLibNvml, state: GpuStateFile) -> None:
        super().__init__(lib)
        self._state = state

    def __getattr__(self, name: str) -> CSymbol:
        symbol = super().__getattr__(name)
        synced = _SyncedSymbol(symbol, self._lib, self._state)
        setattr(self, name, synced)
        return synced


class _SyncedSymbol(CSymbol):
    def __init__(self, inner: CSymbol, lib: FakeLibNvml, state: GpuStateFile) -> None:
        self.__dict__.update(inner.__dict__)
        self._inner = inner
        self._state = state
        self._changes = any(word in inner.__name__ for word in _CHANGING)

    def __call__(self, *args: Any) -> Any:
        with self._state.locked(), self._lib.lock:
            self._state.refresh(self._lib)
            result = self._inner(*args)
            if self._changes:
                self._state.save(self._lib)
            return result


# ---- the format ----------------------------------------------------------------------------


def _document(lib: FakeLibNvml) -> dict[str, Any]:
    document = lib.snapshot()
    document["lost"] = lib.lost  # set once the node lost its driver (FakeLibNvml.lose_driver)
    for row, gpu in zip(document["gpus"], lib.gpus, strict=True):
        row["mig_uuid_counter"] = gpu.mig._created  # noqa: SLF001 (our own stand-in's state)
    return document


def _restore(lib: FakeLibNvml, document: dict[str, Any]) -> None:
    lib.lost = document.get("lost")
    for gpu, row in zip(lib.gpus, document["gpus"], strict=True):
        if row["uuid"] != gpu.uuid:
            raise ValueError(f"{row['uuid']} in the state file is not GPU {gpu.index}")
        mig = row.get("mig") or {}
        gpu.mig_current = mig.get("current", gpu.mig_current)
        gpu.mig_pending = mig.get("pending", gpu.mig_pending)
        gpu.processes = [Process(**p) for p in row.get("processes", ())]
        gpu.xid_events = [dict(e) for e in row.get("xid_events", ())]
        gpu.mig.clear()
        for instance in row.get("gpu_instances", ()):
            _restore_gpu_instance(gpu, instance)
        gpu.mig._created = row.get("mig_uuid_counter", 0)  # noqa: SLF001


def _restore_gpu_instance(gpu: Gpu, row: dict[str, Any]) -> None:
    profile = gpu.mig.profile_by_id(row["profile_id"])
    if profile is None:
        raise ValueError(f"GPU {gpu.index} has no GPU instance profile {row['profile_id']}")
    placement = Placement(row["placement"]["start"], row["placement"]["size"])
    gi = GpuInstance(row["id"], profile, placement)
    for ci_row in row["compute_instances"]:
        ci_profile = next(p for p in compute_profiles(profile) if p.enum == ci_row["profile_id"])
        gi.compute_instances[ci_row["id"]] = ComputeInstance(
            ci_row["id"], ci_profile, ci_row["start"], ci_row["uuid"]
        )
    gpu.mig.gpu_instances[gi.id] = gi


def load_library(state: GpuStateFile) -> FakeLibNvml:
    """A library whose GPUs are the file's (static facts and current state), synced with it."""
    with state.locked():
        document = json.loads(state.path.read_text())
        lib = FakeLibNvml([_static(row) for row in document["gpus"]])
        state.refresh(lib)
    lib.view = SyncedView(lib, state)
    return lib


def _static(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in ("gpu_instances", "processes", "xid_events")}
