"""The NVML stand-in: fake C symbols behind pynvml's own function lookup (test code only).

Simulated nodes' processes get NVML from a C library instead, ``libnvidia-ml.so.1``
(``c/``, laid out per node by ``driver.py``; docs/simulated-nvml.md), over the same state file
(``statefile.py``). This Python stand-in remains for tests that run pynvml-level code in their
own process: the ``fake_nvml`` fixture runs each such test against both (``clib.py`` puts the C
library behind this same seam), and one MIG life-cycle script must get the same answers from
both (tests/harness/test_libnvml_stand_in_and_library_answer_alike.py).

pynvml (nvidia-ml-py 13.615) resolves every C function with ``getattr(nvmlLib, name)`` in
``_nvmlGetFunctionPointer``, caching the result in ``_nvmlGetFunctionPointer_cache``, and
``nvmlInit`` loads ``libnvidia-ml.so.1`` only while ``nvmlLib`` is None. Installing a
``FakeLibNvml``'s view as ``nvmlLib`` (with the cache cleared) therefore runs pynvml's real ctypes
wrappers, structs and error classes unchanged against the stand-in.

Owns: that seam, ``install``/``uninstall`` and the ``installed`` context manager, which save and
restore every pynvml global the stand-in touches: ``nvmlLib``, the function-pointer cache,
``_nvmlLib_refcount`` and ``NVMLError._errcode_to_string`` (pynvml caches strings it got from
nvmlErrorString there). Must not: patch pynvml functions, or be imported by product code.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pynvml

from tests.kit.node.libnvml.device import Gpu, Process
from tests.kit.node.libnvml.library import FakeLibNvml
from tests.kit.node.libnvml.models import MODELS, Placement

__all__ = [
    "MODELS",
    "FakeLibNvml",
    "Gpu",
    "Installation",
    "Placement",
    "Process",
    "install",
    "installed",
    "uninstall",
]


@dataclass(frozen=True)
class Installation:
    """pynvml's globals as they were before ``install``; ``uninstall`` puts them back."""

    library: Any
    function_cache: dict[str, Any]
    refcount: int
    error_strings: dict[int, str]


def install(lib: FakeLibNvml) -> Installation:
    """Make pynvml call ``lib``: set ``nvmlLib`` to its view and clear the symbol cache."""
    with pynvml.libLoadLock:
        saved = Installation(
            library=pynvml.nvmlLib,
            function_cache=dict(pynvml._nvmlGetFunctionPointer_cache),
            refcount=pynvml._nvmlLib_refcount,
            error_strings=dict(pynvml.NVMLError._errcode_to_string),
        )
        pynvml._nvmlGetFunctionPointer_cache.clear()
        pynvml.nvmlLib = lib.view
    return saved


def uninstall(saved: Installation) -> None:
    """Put back everything ``install`` changed, and what pynvml cached meanwhile."""
    with pynvml.libLoadLock:
        pynvml.nvmlLib = saved.library
        pynvml._nvmlGetFunctionPointer_cache.clear()
        pynvml._nvmlGetFunctionPointer_cache.update(saved.function_cache)
        pynvml._nvmlLib_refcount = saved.refcount
        pynvml.NVMLError._errcode_to_string.clear()
        pynvml.NVMLError._errcode_to_string.update(saved.error_strings)


@contextmanager
def installed(lib: FakeLibNvml) -> Iterator[FakeLibNvml]:
    """``lib`` installed for the duration of the block; pynvml restored afterwards."""
    saved = install(lib)
    try:
        yield lib
    finally:
        uninstall(saved)
