"""The ``fake_nvml`` pytest fixture: install an NVML for one test (test code only).

Owns: the library's lifetime in a test: ``fake_nvml(gpus=[...])`` builds a ``FakeLibNvml``,
installs it as pynvml's library and returns it; pynvml's globals are restored after the test,
whatever it did. The fixture is parametrised: each test runs once against the Python stand-in
and once against the simulated nodes' C library, ``libnvidia-ml.so.1`` (clib.py), so the two are
shown to answer alike by every test that uses it. Registered for the whole suite
by ``pytest_plugins`` in tests/conftest.py; no test imports it. Must not: hold NVML behaviour
(the other modules of this package).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import pytest

from tests.kit.node.libnvml import Installation, install, uninstall
from tests.kit.node.libnvml.clib import CLibNvml
from tests.kit.node.libnvml.device import Gpu
from tests.kit.node.libnvml.library import FakeLibNvml


class MakeFakeNvml(Protocol):
    """Install a stand-in with these GPUs (model keys, ``Gpu`` objects or reading dicts)."""

    def __call__(self, gpus: Sequence[str | Gpu | dict[str, Any]] = ...) -> FakeLibNvml: ...


BACKENDS = ("stand-in", "libnvidia-ml.so.1")


@pytest.fixture(params=BACKENDS)
def fake_nvml(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MakeFakeNvml]:
    """``fake_nvml(gpus=["H100-SXM5-80GB", "L4"])`` → an installed ``FakeLibNvml``.

    pynvml is not initialised for you: code under test calls ``pynvml.nvmlInit()`` as it would
    on a node. Calling ``fake_nvml`` again replaces the stand-in; teardown restores pynvml.
    """
    saved: list[Installation] = []

    def make(gpus: Sequence[str | Gpu | dict[str, Any]] = ("H100-SXM5-80GB",)) -> FakeLibNvml:
        if request.param == "stand-in":
            lib = FakeLibNvml(gpus)
        else:
            lib = CLibNvml(gpus, tmp_path_factory.mktemp("driver"))
        if saved:
            uninstall(saved.pop())
        saved.append(install(lib))
        return lib

    try:
        yield make
    finally:
        if saved:
            uninstall(saved.pop())
