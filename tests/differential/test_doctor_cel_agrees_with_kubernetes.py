"""doctor's clause-by-clause CEL verdicts against Kubernetes' own DRA CEL environment.

k8s.io/dynamic-resource-allocation/cel v0.37.2 (tests/oracles/cel, built by gobins) compiles
and evaluates each drawn selector against each drawn device, as the scheduler does; doctor's
evaluator (kubectl_gpu.cel, cel-python) must give the same answer: the same match, or an
error where Kubernetes fails to compile or evaluate. Where the selector uses a function only
Kubernetes' CEL libraries have (semver, quantity, lowerAscii, ...), doctor must say exactly
that it cannot evaluate it here, never guess.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.differential import agreement, oracle

celpy = pytest.importorskip("celpy", reason="cel-python (the dra extra) is not installed")

from kubectl_gpu import cel  # noqa: E402
from kubectl_gpu.doctor import drafacts  # noqa: E402
from kubectl_gpu.doctor.dra import SelectorError  # noqa: E402

DRIVER = "gpu.nvidia.com"
# cel-python raises the recursion limit when it first builds its parser: let it do so before
# hypothesis records the limit it restores after each test.
cel.matches("true", {})
BATCH = 40
EXAMPLES = int(os.environ.get("KUBECTL_GPU_DIFFERENTIAL_EXAMPLES", "3000")) // 3
EXPLORE = os.environ.get("KUBECTL_GPU_DIFFERENTIAL_EXPLORE") == "1"

A = f'device.attributes["{DRIVER}"]'
C = f'device.capacity["{DRIVER}"]'
CLAUSES = [
    f'{A}.productName == "NVIDIA A100-SXM4-80GB"',
    f'{A}.productName.startsWith("NVIDIA A100")',
    f'{A}.productName.endsWith("80GB")',
    f'{A}.productName.contains("H100")',
    f'{A}.productName.matches("^NVIDIA (A|H)100")',
    f"size({A}.productName) > 20",
    f"{A}.index == 0",
    f"{A}.index > 1",
    f"{A}.index in [0, 2]",
    f"{A}.index == 0.0",  # heterogeneous equality: 0 == 0.0
    f'{A}.type == "gpu"',
    f'{A}.type != "mig"',
    f"{A}.migCapable",
    f"!{A}.migCapable",
    f"{A}.migCapable == true",
    f'device.driver == "{DRIVER}"',
    'device.driver == "other.example.com"',
    f'"uuid" in {A}',
    f"has({A}.uuid)",
    "device.allowMultipleAllocations",
    f'{A}.driverVersion == "550.54.15"',  # a version is not a string to Kubernetes
    f'{C}.memory == "40Gi"',  # nor is a quantity
    f'{A}.driverVersion.isGreaterThan(semver("550.0.0"))',  # Kubernetes-only functions
    f'{C}.memory.compareTo(quantity("40Gi")) >= 0',
    f'{A}.productName.lowerAscii().contains("a100")',
    f"{A}.productName == 1",  # wrong types, missing things, syntax
    f"{A}.missing == 1",
    'device.attributes["other.example.com"].index == 0',
    f"{A}.index ==",
    f"{A}.index > > 1",
]


@st.composite
def selectors(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(CLAUSES), min_size=1, max_size=3))
    text = parts[0]
    for part in parts[1:]:
        operator = draw(st.sampled_from([" && ", " || ", " && !(", " || ("]))
        text += operator + part + (")" if operator.endswith("(") else "")
    return f"({text})" if draw(st.booleans()) else text


ATTRIBUTES = {
    "productName": st.sampled_from(["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "L4"]),
    "index": st.integers(0, 3),
    "type": st.sampled_from(["gpu", "mig"]),
    "uuid": st.just("GPU-8f4c2bbe-1111-2222-3333-444455556666"),
    "migCapable": st.booleans(),
    "driverVersion": st.sampled_from(["550.54.15", "535.104.5"]),
}
_KIND = {"productName": "string", "index": "int", "type": "string", "uuid": "string",
         "migCapable": "bool", "driverVersion": "version"}  # fmt: skip


@st.composite
def devices(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(sorted(ATTRIBUTES)), unique=True))
    attributes = {n: {_KIND[n]: draw(ATTRIBUTES[n])} for n in names}
    device: dict[str, Any] = {"name": "gpu-0", "attributes": attributes}
    if draw(st.booleans()):
        device["capacity"] = {"memory": {"value": draw(st.sampled_from(["40Gi", "81920Mi"]))}}
    if draw(st.booleans()):
        device["allowMultipleAllocations"] = draw(st.booleans())
    return device


@dataclasses.dataclass
class Tally:
    pairs: int = 0
    same: int = 0
    unevaluable: int = 0
    disagreements: list[str] = dataclasses.field(default_factory=list)


def compare(program: Path, pairs: list[tuple[str, dict[str, Any]]]) -> Tally:
    texts = [json.dumps({"expression": e, "driver": DRIVER, "device": d}) for e, d in pairs]
    tally = Tally()
    for (expression, device), theirs in zip(pairs, oracle.verdicts(program, texts), strict=True):
        tally.pairs += 1
        (view,) = drafacts.devices_from_slice({"spec": {"driver": DRIVER, "devices": [device]}})
        try:
            ours: bool | str = cel.matches(expression, view.view)
        except SelectorError as e:
            ours = str(e)
        expected = theirs.get("matches") if theirs["compiled"] else None
        if isinstance(ours, str) and ours.startswith("cannot evaluate here:"):
            if any(f"{name}(" in expression for name in cel.KUBERNETES_ONLY):
                tally.unevaluable += 1
                continue
        if expected is None and isinstance(ours, str) or ours == expected:
            tally.same += 1
            continue
        tally.disagreements.append(
            f"{expression}\n  device: {json.dumps(device)}\n  Kubernetes: "
            f"{theirs.get('matches', theirs.get('error'))}\n  doctor: {ours}"
        )
    agreement.record(tally, "cel-oracle")
    return tally


@pytest.mark.timeout(600)
@settings(
    max_examples=max(1, EXAMPLES // BATCH),
    deadline=None,
    database=None,
    derandomize=not EXPLORE,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],
)
@given(pairs=st.lists(st.tuples(selectors(), devices()), min_size=BATCH, max_size=BATCH))
def test_doctor_evaluates_selectors_as_kubernetes_does(
    cel_oracle: Path, pairs: list[tuple[str, dict[str, Any]]]
) -> None:
    tally = compare(cel_oracle, pairs)
    shown = "\n\n".join(tally.disagreements[:3])
    assert not tally.disagreements, f"{len(tally.disagreements)} disagreement(s):\n{shown}"
