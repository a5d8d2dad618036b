"""The C library behind pynvml's library seam, for in-process tests (test code only).

The simulated nodes' processes load `libnvidia-ml.so.1` (tests/kit/node/libnvml/c) through
pynvml's own `CDLL`; tests that run pynvml-level code in the test's own process (the NVML
adapter, the agent's reconcile pass, the stand-in's own behaviour tests) get the same library
here, so they run against the C library and the stand-in alike.

The GPUs live in a driver root's state file (statefile.py) and a ``FakeLibNvml`` holds the
test's view of them: its hooks (``add_process``, ``reset``, ``withhold``, ``lose_driver``…)
change the Python objects, which are written to the file before each C call and read back after
it, so the hooks and the C library see one truth; ``calls`` records the names called and
``on_return`` actions run as in the stand-in. The view installed as ``pynvml.nvmlLib`` forwards
each symbol to a copy of the library in that driver root (the library finds its state file from
its own path), built without a SONAME so that it never answers a later
`CDLL("libnvidia-ml.so.1")` of the test's process. Only a non-root caller (``privileged``) has
no C counterpart: the test is skipped on this backend, saying so.

Owns: that backend (``CLibNvml``, ``served_by_c``). Must not: hold NVML behaviour (that is the
C library's).
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.kit.node.libnvml import codes, installed
from tests.kit.node.libnvml.device import Gpu
from tests.kit.node.libnvml.driver import DriverRoot, in_process_library, lay_out
from tests.kit.node.libnvml.library import FakeLibNvml
from tests.kit.node.libnvml.statefile import GpuStateFile


class CLibNvml(FakeLibNvml):
    """A node's GPUs served by the C library from a new driver root at `driver`."""

    def __init__(self, gpus: Sequence[str | Gpu | dict[str, Any]], driver: Path) -> None:
        super().__init__(gpus)
        self.driver: DriverRoot = lay_out(driver)
        state = GpuStateFile(self.driver.state)
        with state.locked(), self.lock:
            state.save(self)
        self.view = CLibraryView(self, state)  # type: ignore[assignment]

    @property
    def privileged(self) -> bool:
        return True

    @privileged.setter
    def privileged(self, value: bool) -> None:
        if not value:
            pytest.skip("the simulated node's C library runs as root: no NO_PERMISSION to play")


@contextmanager
def served_by_c(lib: FakeLibNvml, state: GpuStateFile) -> Iterator[FakeLibNvml]:
    """pynvml calls the C library of `state`'s driver root (with `lib`'s hooks) in the block."""
    with installed(_Hooked(lib, state)):  # type: ignore[arg-type]
        yield lib


class _Hooked:
    """What ``tests.kit.node.libnvml.install`` needs of a library: its ``view``."""

    def __init__(self, lib: FakeLibNvml, state: GpuStateFile) -> None:
        self.view = CLibraryView(lib, state)


@cache
def _loaded(state_path: Path) -> ctypes.CDLL:
    """The library of one driver root, loaded once per test process."""
    return ctypes.CDLL(str(in_process_library(DriverRoot(state_path.parent))))


class CLibraryView:
    """``pynvml.nvmlLib``: the C library's symbols, each call synced with the test hooks."""

    def __init__(self, lib: FakeLibNvml, state: GpuStateFile) -> None:
        self._lib = lib
        self._state = state
        self._cdll = _loaded(state.path)

    def __getattr__(self, name: str) -> _CCall:
        function = getattr(self._cdll, name)  # AttributeError, as CDLL: FunctionNotFound
        symbol = _CCall(self._lib, self._state, name, function)
        setattr(self, name, symbol)
        return symbol

    def __repr__(self) -> str:
        return f"<CDLL {self._cdll._name!r}, {len(self._lib.gpus)} GPUs>"


class _CCall:
    """One C function as pynvml calls it: the hooks' state written first, read back after."""

    def __init__(self, lib: FakeLibNvml, state: GpuStateFile, name: str, function: Any) -> None:
        self.__name__ = name
        self._lib = lib
        self._state = state
        self._function = function

    @property
    def restype(self) -> Any:
        return self._function.restype

    @restype.setter
    def restype(self, value: Any) -> None:  # pynvml sets it on nvmlErrorString
        self._function.restype = value

    def __call__(self, *args: Any) -> Any:
        lib, state = self._lib, self._state
        # The file's lock first, then the library's: the order SimNode and statefile.py use.
        with state.locked(), lib.lock:
            lib.calls.append(self.__name__)
            state.save(lib)
        result = self._function(*args)  # the C library takes the file's lock itself
        with state.locked(), lib.lock:
            state.refresh(lib)
            if result == codes.SUCCESS and self.__name__.startswith("nvmlInit"):
                lib.init_count += 1
            elif result == codes.SUCCESS and self.__name__ == "nvmlShutdown":
                lib.init_count -= 1
        action = lib.after_return.get(self.__name__)
        if action is not None:
            action()
        return result
