"""Installing the stand-in changes only pynvml's library seam, and removing it puts back every
global it touched, so code run afterwards sees pynvml as it was: without a real libnvidia-ml,
nvmlInit fails with NVMLError_LibraryNotFound again."""

from __future__ import annotations

import ctypes.util

import pynvml
import pytest

from tests.kit.node.libnvml import FakeLibNvml, install, installed, uninstall
from tests.kit.node.libnvml.fixture import MakeFakeNvml

NO_REAL_LIBRARY = ctypes.util.find_library("nvidia-ml") is None and pynvml.nvmlLib is None


def _globals() -> tuple[object, dict[str, object], int, dict[int, str]]:
    return (
        pynvml.nvmlLib,
        dict(pynvml._nvmlGetFunctionPointer_cache),
        pynvml._nvmlLib_refcount,
        dict(pynvml.NVMLError._errcode_to_string),
    )


def test_leaving_the_block_restores_every_global_pynvml_changed() -> None:
    before = _globals()

    with installed(FakeLibNvml(["A30"])):
        pynvml.nvmlInit()
        pynvml.nvmlDeviceGetHandleByIndex(0)
        str(pynvml.NVMLError(pynvml.NVML_ERROR_IN_USE))  # caches the fake's error string
        assert _globals() != before

    assert _globals() == before


def test_globals_are_restored_even_when_the_block_fails() -> None:
    before = _globals()

    with pytest.raises(pynvml.NVMLError_Uninitialized), installed(FakeLibNvml(["L4"])):
        pynvml.nvmlDeviceGetCount()

    assert _globals() == before


@pytest.mark.skipif(not NO_REAL_LIBRARY, reason="a real libnvidia-ml is present on this machine")
def test_without_the_stand_in_nvml_init_finds_no_library_again() -> None:
    saved = install(FakeLibNvml(["H100-SXM5-80GB"]))
    pynvml.nvmlInit()
    uninstall(saved)

    with pytest.raises(pynvml.NVMLError_LibraryNotFound):
        pynvml.nvmlInit()
    assert pynvml.nvmlLib is None


def test_the_fixture_replaces_one_stand_in_with_the_next(fake_nvml: MakeFakeNvml) -> None:
    fake_nvml(gpus=["L4"])
    pynvml.nvmlInit()
    first_name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))

    fake_nvml(gpus=["A30", "A30"])
    pynvml.nvmlInit()

    assert first_name == "NVIDIA L4"
    assert pynvml.nvmlDeviceGetCount() == 2
    assert pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0)) == "NVIDIA A30"


def test_the_stand_in_records_which_symbols_pynvml_called(fake_nvml: MakeFakeNvml) -> None:
    lib = fake_nvml(gpus=["L4"])

    pynvml.nvmlInit()
    pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(0))

    assert lib.calls == ["nvmlInitWithFlags", "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetUUID"]
