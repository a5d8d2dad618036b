"""`validate` on NVIDIA's opaque DRA configs (GpuConfig, MigDeviceConfig) against the driver's
own reading: strict decoding by apimachinery, Normalize, Validate and the per-strategy checks
its kubelet plugin makes (tests/oracles/dra-driver, built by gobins).

Each drawn config sits in a ResourceClaim as `opaque.parameters` for gpu.nvidia.com. With the
driver's two alpha gates on, a config it refuses must get an error and one it accepts none;
with them off (the default), a config that fails only for its gate must get validate's
dra.feature-gate warning.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from kubectl_gpu import validation
from kubectl_gpu.findings import Severity
from tests.differential import agreement, oracle
from tests.differential.configs import _weighted

BATCH = 40
EXAMPLES = int(os.environ.get("KUBECTL_GPU_DIFFERENTIAL_EXAMPLES", "3000")) // 3
EXPLORE = os.environ.get("KUBECTL_GPU_DIFFERENTIAL_EXPLORE") == "1"
ABSENT = object()


def _fields(**pools: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(pools).map(
        lambda d: {k: v for k, v in d.items() if v is not ABSENT}
    )


def _maybe(*values: Any, absent: int = 1) -> st.SearchStrategy[Any]:
    """Absent (weight `absent`) or one of the values, each as likely as the others."""
    return _weighted((absent, st.just(ABSENT)), (len(values), st.sampled_from(values)))


QUANTITIES = ("10Gi", "512Mi", "1Mi", "1Ki", "0", "1.5Gi", "10G", "lots", 1024, -1)
MPS = _fields(
    defaultActiveThreadPercentage=_maybe(0, 50, 100, 101, -1, "50", 50.5, absent=3),
    defaultPinnedDeviceMemoryLimit=_maybe(*QUANTITIES, absent=5),
    defaultPerDevicePinnedMemoryLimit=_maybe(
        {"0": "8Gi"}, {"1": "8Gi"}, {"GPU-8f4c2bbe-1111-2222-3333-444455556666": "1Gi"},
        {"x": "1Gi"}, {"0": "1Ki"}, {"0": "lots"}, "8Gi", absent=4,
    ),
    multiUser=_maybe(True, absent=8),  # not a driver field
)  # fmt: skip
SHARING = _fields(
    strategy=_maybe("TimeSlicing", "MPS", "timeslicing", "None", 1, absent=0),
    timeSlicingConfig=_weighted(
        (3, st.just(ABSENT)),
        (2, _fields(interval=_maybe("Default", "Short", "Medium", "Long", "long", 5))),
    ),
    mpsConfig=_weighted((1, st.just(ABSENT)), (2, MPS)),
    extra=_maybe(1, absent=10),
)
CONFIG = _fields(
    apiVersion=_weighted(
        (10, st.just("resource.nvidia.com/v1beta1")), (1, st.just("resource.nvidia.com/v1"))
    ),
    kind=_maybe("GpuConfig", "GpuConfig", "MigDeviceConfig", "gpuConfig", absent=0),
    sharing=_weighted((1, st.just(ABSENT)), (6, SHARING), (1, st.just(None))),
    Sharing=_maybe({"strategy": "MPS"}, absent=12),
)


_V = {"apiVersion": "resource.nvidia.com/v1beta1"}
_PER_DEVICE, _PERCENTAGE = "defaultPerDevicePinnedMemoryLimit", "defaultActiveThreadPercentage"
_DEFAULT_LIMIT = "defaultPinnedDeviceMemoryLimit"
PAST: list[dict[str, Any]] = [
    {**_V, "kind": kind, "sharing": sharing}
    for kind, sharing in (
        ("GpuConfig", {"strategy": "MPS", "mpsConfig": {"multiUser": True}}),
        ("GpuConfig", {"strategy": "MPS", "mpsConfig": {_PER_DEVICE: {"1": "1Gi"}}}),
        ("GpuConfig", {"strategy": "MPS", "mpsConfig": {_PER_DEVICE: {"0": "1Gi"}}}),
        ("GpuConfig", {"strategy": "MPS", "mpsConfig": {_PERCENTAGE: 101}}),
        ("GpuConfig", {"strategy": "MPS", "mpsConfig": {_PERCENTAGE: 100}}),
        ("MigDeviceConfig", {"strategy": "TimeSlicing", "mpsConfig": {}}),
        ("GpuConfig", {"strategy": "TimeSlicing", "mpsConfig": {_DEFAULT_LIMIT: "lots"}}),
        ("GpuConfig", {"strategy": "None", "mpsConfig": {"multiUser": True}}),
        ("GpuConfig", {"strategy": 1}),
    )
]


def claim(parameters: dict[str, Any]) -> str:
    device_class = (
        "mig.nvidia.com" if parameters.get("kind") == "MigDeviceConfig" else "gpu.nvidia.com"
    )
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "drawn", "namespace": "default"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}],
                "config": [
                    {
                        "requests": ["gpu"],
                        "opaque": {"driver": "gpu.nvidia.com", "parameters": parameters},
                    }
                ],
            }
        },
    }
    return yaml.safe_dump(body, sort_keys=False)


# The driver stops at its first error: one of ours must stand for it (message -> codes).
REASONS = (
    ("unknown field", {"dra.config-unknown-field", "dra.unknown-field"}),
    ("no kind|not registered|Object 'Kind'", {"dra.config-decoding", "dra.unknown-kind"}),
    ("quantities must match|quantity", {"dra.memory-quantity", "dra.config-decoding"}),
    ("cannot unmarshal|decoding", {"dra.config-decoding", "dra.memory-quantity"}),
    ("active thread percentage", {"dra.thread-percentage"}),
    ("invalid limit", {"dra.memory-limit"}),
    ("unable to parse key", {"dra.memory-device-key"}),
    ("invalid device index", {"dra.memory-device-index"}),
    ("unknown GPU sharing strategy", {"dra.unknown-strategy"}),
    ("time-slice interval", {"dra.unknown-interval", "dra.timeslicing-without-interval"}),
    ("cannot use", {"dra.strategy-config-mismatch"}),
)


def same_reason(message: str, codes: set[str]) -> bool:
    for pattern, wanted in REASONS:
        if re.search(pattern, message):
            return bool(codes & wanted)
    return True  # a failure no rule of ours names: any error will do


@dataclasses.dataclass
class Tally:
    configs: int = 0
    refused: int = 0
    accepted: int = 0
    gated: int = 0
    disagreements: list[str] = dataclasses.field(default_factory=list)


def compare(program: Path, configs: list[dict[str, Any]]) -> Tally:
    texts = [json.dumps(c) for c in configs]
    gated_on = oracle.verdicts(program, texts, "-gates", "TimeSlicingSettings,MPSSupport")
    gated_off = oracle.verdicts(program, texts)
    tally = Tally()
    for config, on, off in zip(configs, gated_on, gated_off, strict=True):
        tally.configs += 1
        report = validation.validate_text(claim(config), "claim.yaml")
        errors = [f"{f.code}: {f.message}" for f in report.findings if f.severity is Severity.ERROR]
        codes = {f.code for f in report.findings}
        wrong = ""
        if not on["accepted"]:
            tally.refused += 1
            wrong = "" if errors else "the driver refuses it, validate accepts it"
            error_codes = {f.code for f in report.findings if f.severity is Severity.ERROR}
            if errors and not same_reason(on["error"], error_codes):
                wrong = "the driver refuses it for another reason than validate"
        else:
            tally.accepted += 1
            wrong = "the driver accepts it, validate refuses it" if errors else ""
            if not off["accepted"] and not wrong:
                tally.gated += 1
                if "feature gate" in off["error"] and "dra.feature-gate" not in codes:
                    wrong = "it needs a feature gate, validate does not say so"
        if wrong:
            tally.disagreements.append(
                f"{wrong}\n{yaml.safe_dump(config, sort_keys=False)}driver (gates on): "
                f"{on.get('error', 'accepted')}\nvalidate: {errors or 'no error'}"
            )
    agreement.record(tally, "dra-driver-oracle")
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
@example(configs=PAST)  # every disagreement found so far, judged on every run
@given(configs=st.lists(CONFIG, min_size=BATCH, max_size=BATCH))
def test_validate_reads_dra_configs_as_the_driver_does(
    dra_driver_oracle: Path, configs: list[dict[str, Any]]
) -> None:
    tally = compare(dra_driver_oracle, configs)
    shown = "\n\n".join(tally.disagreements[:3])
    assert not tally.disagreements, f"{len(tally.disagreements)} disagreement(s):\n{shown}"
