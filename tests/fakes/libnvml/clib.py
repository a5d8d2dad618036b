"""The C library behind pynvml's library seam, for in-process tests (test code only).

The simulated nodes' processes load `libnvidia-ml.so.1` (tests/fakes/libnvml/c) through
pynvml's own `CDLL`; unit tests that run pynvml-level code in the test's process (the NVML
adapter, the stand-in's own behaviour tests) get the same library here, so each such test runs
against both the Python stand-in and the C library and shows they answer alike.

`CLibNvml` is a ``FakeLibNvml`` whose GPUs live in a driver root's state file: the test hooks
(``add_process``, ``reset``, ``gpu(i)``…) change the Python objects, which are written to the
file before each C call and read back after it, so the hooks and the C library see one truth.
Its view, installed as ``pynvml.nvmlLib``, forwards each symbol to the loaded library (a copy per
driver root, as the library finds its state file from its own path, and without a SONAME, so
that it never answers a later `CDLL("libnvidia-ml.so.1")` of the test's process) and records
the names called.
Hooks that only the Python stand-in can play (a non-root caller, a lost driver, a signal during a
call) skip the test on this backend, saying so.

Owns: that backend. Must not: hold NVML behaviour (that is the C library's).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.libnvml import codes
from tests.fakes.libnvml.device import Gpu
from tests.fakes.libnvml.driver import DriverRoot, in_process_library, lay_out
from tests.fakes.libnvml.library import FakeLibNvml
from tests.fakes.libnvml.statefile import GpuStateFile

_ONLY_THE_STAND_IN = "the simulated node's C library has no such hook: only the stand-in plays"


class CLibNvml(FakeLibNvml):
    """A node's GPUs served by the C library from `driver`'s state file."""

    def __init__(self, gpus: Sequence[str | Gpu | dict[str, Any]], driver: Path) -> None:
        super().__init__(gpus)
        self.driver: DriverRoot = lay_out(driver)
        self.state = GpuStateFile(self.driver.state)
        with self.state.locked(), self.lock:
            self.state.save(self)
        self.cdll = ctypes.CDLL(str(in_process_library(self.driver)))
        self.view = CLibraryView(self)  # type: ignore[assignment]

    @property
    def privileged(self) -> bool:
        return True

    @privileged.setter
    def privileged(self, value: bool) -> None:
        if not value:
            pytest.skip(f"{_ONLY_THE_STAND_IN} a non-root caller (NO_PERMISSION)")

    def lose_driver(self, code: int = codes.UNKNOWN) -> None:
        pytest.skip(f"{_ONLY_THE_STAND_IN} a driver lost under a running container")

    def on_return(self, symbol: str, action: Callable[[], None]) -> None:
        pytest.skip(f"{_ONLY_THE_STAND_IN} an action run as a symbol returns")


class CLibraryView:
    """``pynvml.nvmlLib``: the C library's symbols, each call synced with the test hooks."""

    def __init__(self, lib: CLibNvml) -> None:
        self._lib = lib

    def __getattr__(self, name: str) -> _CCall:
        function = getattr(self._lib.cdll, name)  # AttributeError, as CDLL: FunctionNotFound
        symbol = _CCall(self._lib, name, function)
        setattr(self, name, symbol)
        return symbol

    def __repr__(self) -> str:
        return f"<CDLL {str(self._lib.driver.library)!r}, {len(self._lib.gpus)} GPUs>"


class _CCall:
    """One C function as pynvml calls it: the hooks' state written first, read back after."""

    def __init__(self, lib: CLibNvml, name: str, function: Any) -> None:
        self.__name__ = name
        self._lib = lib
        self._function = function

    @property
    def restype(self) -> Any:
        return self._function.restype

    @restype.setter
    def restype(self, value: Any) -> None:  # pynvml sets it on nvmlErrorString
        self._function.restype = value

    def __call__(self, *args: Any) -> Any:
        lib, state = self._lib, self._lib.state
        with lib.lock:
            lib.calls.append(self.__name__)
            with state.locked():
                state.save(lib)
            result = self._function(*args)  # the C library takes the file's lock itself
            with state.locked():
                state.refresh(lib)
            if result == codes.SUCCESS and self.__name__.startswith("nvmlInit"):
                lib.init_count += 1
            elif result == codes.SUCCESS and self.__name__ == "nvmlShutdown":
                lib.init_count -= 1
        return result
