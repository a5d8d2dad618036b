"""The ``fake_nvml`` pytest fixture: install the NVML stand-in for one test (test code only).

Owns: the stand-in's lifetime in a test: ``fake_nvml(gpus=[...])`` builds a ``FakeLibNvml``,
installs it as pynvml's library and returns it; pynvml's globals are restored after the test,
whatever it did. Must not: hold NVML behaviour (the other modules of this package) or be
collected as a conftest: tests import it explicitly with
``from tests.fakes.libnvml.fixture import fake_nvml as fake_nvml``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import pytest

from tests.fakes.libnvml import Installation, install, uninstall
from tests.fakes.libnvml.device import Gpu
from tests.fakes.libnvml.library import FakeLibNvml


class MakeFakeNvml(Protocol):
    """Install a stand-in with these GPUs (model keys, ``Gpu`` objects or reading dicts)."""

    def __call__(self, gpus: Sequence[str | Gpu | dict[str, Any]] = ...) -> FakeLibNvml: ...


@pytest.fixture
def fake_nvml() -> Iterator[MakeFakeNvml]:
    """``fake_nvml(gpus=["H100-SXM5-80GB", "L4"])`` → an installed ``FakeLibNvml``.

    pynvml is not initialised for you: code under test calls ``pynvml.nvmlInit()`` as it would
    on a node. Calling ``fake_nvml`` again replaces the stand-in; teardown restores pynvml.
    """
    saved: list[Installation] = []

    def make(gpus: Sequence[str | Gpu | dict[str, Any]] = ("H100-SXM5-80GB",)) -> FakeLibNvml:
        lib = FakeLibNvml(gpus)
        if saved:
            uninstall(saved.pop())
        saved.append(install(lib))
        return lib

    try:
        yield make
    finally:
        if saved:
            uninstall(saved.pop())
