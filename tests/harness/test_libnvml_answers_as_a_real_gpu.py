"""The NVML stand-in, playing a model that a real GPU was read from, gives the same answers the
real driver gave (tests/data/nvml), and kubectl-gpu's reader makes the same of both.

The reading was taken read-only with scripts/nvml_readings.py; this test runs that very script
against the stand-in, so a question asked of the real GPU is asked of the stand-in alike. Only
the lent machine's identity (UUID, PCI bus position) and readings that neither kubectl-gpu nor
the stand-in speak of are left out. Memory is compared whole: the real GPU was idle.
"""

from __future__ import annotations

import copy
import importlib.util
import json
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.fakes.libnvml.fixture import MakeFakeNvml
from tests.fakes.libnvml.fixture import fake_nvml as fake_nvml

READINGS = ROOT / "tests" / "data" / "nvml"
# the stand-in model that plays each real reading
PLAYED_BY = {"h200-driver-580.159.04.json": "H200-SXM-141GB"}


def _script() -> ModuleType:
    path = ROOT / "scripts" / "nvml_readings.py"
    spec = importlib.util.spec_from_file_location("nvml_readings", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _comparable(readings: dict[str, Any]) -> dict[str, Any]:
    found = copy.deepcopy(readings)
    found.pop("nvidia-ml-py", None)  # the library here may be another release
    for gpu in found["gpus"]:
        del gpu["uuid"], gpu["architecture"]
        gpu["pci"] = {k: gpu["pci"][k] for k in ("pciDeviceId", "pciSubSystemId")}
    return found


def _without_uuids(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_uuids(v) for k, v in value.items() if k != "uuid"}
    if isinstance(value, list):
        return [_without_uuids(v) for v in value]
    return value


@pytest.fixture(params=sorted(PLAYED_BY))
def real(request: pytest.FixtureRequest, fake_nvml: MakeFakeNvml) -> dict[str, Any]:
    """A real reading, with the stand-in installed playing as many GPUs of its model."""
    reading: dict[str, Any] = json.loads((READINGS / request.param).read_text())
    fake_nvml(gpus=[PLAYED_BY[request.param]] * len(reading["gpus"]))
    return reading


def test_the_stand_in_answers_what_the_real_driver_answered(real: dict[str, Any]) -> None:
    played = _script().nvml_readings()

    real_gpu, played_gpu = _comparable(real)["gpus"][0], _comparable(played)["gpus"][0]
    profiles = zip(
        real_gpu.pop("gpu_instance_profiles"), played_gpu.pop("gpu_instance_profiles"), strict=True
    )
    for enum, (want, got) in enumerate(profiles):
        assert got == want, f"GPU-instance profile enum {enum}"
    assert played_gpu == real_gpu
    assert {k: played[k] for k in ("driver", "nvml", "cuda_driver")} == {
        k: real[k] for k in ("driver", "nvml", "cuda_driver")
    }


def test_kubectl_gpu_reads_the_stand_in_as_it_read_the_real_gpu(real: dict[str, Any]) -> None:
    ours = json.loads(json.dumps(_script()._ours()))  # as the reading was written

    assert "error" not in real["kubectl_gpu"], real["kubectl_gpu"]
    assert _without_uuids(ours) == _without_uuids(real["kubectl_gpu"])


def test_the_readings_were_taken_read_only() -> None:
    """The script may only ask: no NVML call that sets, creates, destroys or resets."""
    source = (ROOT / "scripts" / "nvml_readings.py").read_text()
    calls = {word for word in source.replace("(", " ").split() if word.startswith("pynvml.nvml")}
    writes = [c for c in calls if any(v in c for v in ("Set", "Create", "Destroy", "Reset"))]
    assert calls and not writes
    assert (READINGS / "README.md").is_file()
