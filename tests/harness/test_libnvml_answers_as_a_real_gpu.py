"""The simulated NVML, playing a model that a real GPU was read from, gives the same answers the
real driver gave (tests/data/nvml), and kubectl-gpu's reader makes the same of both.

The reading was taken read-only with scripts/nvml_readings.py; these tests run that very script
against the simulated NVML, so a question asked of the real GPU is asked of it alike: in a
process of its own, where pynvml loads a node's libnvidia-ml.so.1 through the dynamic linker as
on a GPU node, and in the test's process against both the Python stand-in and the C library
(the ``fake_nvml`` fixture). Only the lent machine's identity (UUID, PCI bus position) and
readings that neither kubectl-gpu nor the simulation speak of are left out. Memory is compared
whole: the real GPU was idle.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.kit.node.libnvml import FakeLibNvml
from tests.kit.node.libnvml.driver import lay_out
from tests.kit.node.libnvml.fixture import MakeFakeNvml
from tests.kit.node.libnvml.statefile import GpuStateFile

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


@pytest.fixture(params=sorted(PLAYED_BY))
def read_on_a_node(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[dict[str, Any], Any]:
    """(a real reading, the script's reading of a simulated node playing it), the script run
    as on a GPU node: its own process, pynvml finding libnvidia-ml.so.1 on the linker's path."""
    reading: dict[str, Any] = json.loads((READINGS / request.param).read_text())
    driver = lay_out(tmp_path / "driver")
    node = FakeLibNvml([PLAYED_BY[request.param]] * len(reading["gpus"]))
    state = GpuStateFile(driver.state)
    with state.locked():
        state.save(node)
    out = tmp_path / "reading.json"
    done = subprocess.run(  # noqa: S603 (fixed argv)
        [sys.executable, str(ROOT / "scripts" / "nvml_readings.py"), str(out)],
        env={**os.environ, **driver.env()}, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return reading, json.loads(out.read_text())


def test_a_nodes_library_answers_what_the_real_driver_answered(
    read_on_a_node: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    real, played = read_on_a_node
    _assert_same_answers(real, played)


def test_kubectl_gpu_reads_a_nodes_library_as_it_read_the_real_gpu(
    read_on_a_node: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    real, played = read_on_a_node
    assert "error" not in real["kubectl_gpu"], real["kubectl_gpu"]
    assert _without_uuids(played["kubectl_gpu"]) == _without_uuids(real["kubectl_gpu"])


def test_the_stand_in_answers_what_the_real_driver_answered(real: dict[str, Any]) -> None:
    _assert_same_answers(real, _script().nvml_readings())


def _assert_same_answers(real: dict[str, Any], played: dict[str, Any]) -> None:
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
