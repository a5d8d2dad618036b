"""The GPUUsage document the agent serves: read back as written; another version, a wrong
shape or counts past the bounds are a UsageDocumentError naming what is wrong."""

from __future__ import annotations

from typing import Any

import pytest

from kubectl_gpu.usage import document
from kubectl_gpu.usage.document import Attributed, Held, NodeUsage, UsageDocumentError
from kubectl_gpu.usage.readings import GpuReading, MigReading, ProcessReading

GPU = "GPU-aaaaaaaa-1111-2222-3333-444444444444"


def usage() -> NodeUsage:
    mig = MigReading("MIG-1", "1g.10gb", 9, 0, 10 * 2**30, 2**30, 6, 1)
    gpu = GpuReading(0, GPU, "H100", 80 * 2**30, 2**30, None, "mig", True, (mig,))
    process = Attributed(ProcessReading(7, 2**30, 9, 0, None, "mig"), "uid-1", "c" * 64)
    held = Held(
        "MIG-1",
        "nvidia.com/mig-1g.10gb",
        "podresources",
        GPU,
        "MIG-1",
        None,
        None,
        "ml",
        "train",
        "uid-1",
        "main",
    )
    return NodeUsage(
        "n1", "1.0", "2026-11-28T06:00:00Z", (gpu,), ((GPU, process),), (held,), ("x",)
    )


def test_the_document_reads_back_as_written() -> None:
    assert document.from_dict(usage().to_dict()) == usage()


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"apiVersion": "kubectl-gpu.io/v2"}, "is the agent a different version"),
        ({"kind": "GPUNodeReport"}, "not a kubectl-gpu.io/v1 GPUUsage"),
        ({"gpus": "many"}, "`gpus` is not a list"),
        ({"gpus": [{}] * (document.MAX_GPUS + 1)}, "more than the 64 allowed"),
        ({"node": 5}, "`node` is not a string"),
        ({"held": [{"deviceID": "x"}]}, "resource"),
    ],
)
def test_a_bad_answer_is_refused_with_the_reason(change: dict[str, Any], words: str) -> None:
    doc = {**usage().to_dict(), **change}
    with pytest.raises(UsageDocumentError, match=words):
        document.from_dict(doc)


@pytest.mark.parametrize("value", [-1, 2**70, "12", 1.5, True])
def test_numbers_out_of_range_or_of_the_wrong_type_are_refused(value: object) -> None:
    doc = usage().to_dict()
    doc["gpus"][0]["processes"][0]["usedMemoryBytes"] = value
    with pytest.raises(UsageDocumentError):
        document.from_dict(doc)


def test_not_an_object_is_refused() -> None:
    with pytest.raises(UsageDocumentError, match="not a JSON object"):
        document.from_dict([1, 2])
