"""End to end through `validation.validate_text`: every DRA example produces exactly the
findings its `# expect:` lines list, at those lines, and every DRA rule is shown by one."""

from __future__ import annotations

import pathlib
import re

import pytest

from kubectl_gpu import dra, validation
from kubectl_gpu.findings import Severity

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "dra"
VALID = sorted((EXAMPLES / "valid").glob("*.yaml"))
INVALID = sorted((EXAMPLES / "invalid").glob("*.yaml"))
EXPECT = re.compile(r"^# expect: (\S+) line (\d+)\s*$", re.MULTILINE)


def expected(text: str) -> set[tuple[str, int]]:
    return {(code, int(line)) for code, line in EXPECT.findall(text)}


def produced(path: pathlib.Path) -> tuple[set[tuple[str, int | None]], validation.FileReport]:
    report = validation.validate_text(path.read_text("utf-8"), str(path))
    return {(f.code, f.line) for f in report.findings}, report


@pytest.mark.parametrize("path", VALID + INVALID, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_example_produces_exactly_its_expected_findings(path: pathlib.Path) -> None:
    found, _ = produced(path)
    assert found == expected(path.read_text("utf-8"))


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_valid_examples_have_no_errors(path: pathlib.Path) -> None:
    _, report = produced(path)
    assert report.valid
    assert report.documents[0].kind in ("dra", "list")


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_examples_have_an_error(path: pathlib.Path) -> None:
    text = path.read_text("utf-8")
    assert text.startswith("# expect: "), "expectations come first in the file"
    _, report = produced(path)
    assert not report.valid


def test_every_rule_is_shown_by_an_example() -> None:
    shown = set()
    for path in VALID + INVALID:
        shown |= {code for code, _ in expected(path.read_text("utf-8"))}
    assert set(dra.RULES) <= shown
    errors = {code for code, (severity, _, _) in dra.RULES.items() if severity is Severity.ERROR}
    in_invalid = {code for p in INVALID for code, _ in expected(p.read_text("utf-8"))}
    assert errors <= in_invalid, "every error rule has an invalid example"


def messages(name: str) -> dict[str, list[str]]:
    _, report = produced(EXAMPLES / "invalid" / name)
    found: dict[str, list[str]] = {}
    for f in report.findings:
        found.setdefault(f.code, []).append(f.message)
    return found


def test_driver_wording_reaches_the_user() -> None:
    mixups = messages("sharing-strategy-mixups.yaml")
    assert mixups["dra.unknown-strategy"] == [
        "unknown GPU sharing strategy: timeslicing, supported GPU sharing strategies: "
        "TimeSlicing, MPS"
    ]
    assert mixups["dra.strategy-config-mismatch"][0].startswith(
        "cannot use MpsConfig with the 'TimeSlicing' strategy"
    )
    assert mixups["dra.strategy-config-mismatch"][1].startswith(
        "cannot use TimeSlicingConfig with the 'MPS' strategy"
    )
    gate = mixups["dra.feature-gate"][0]
    assert '"TimeSlicingSettings" feature gate is not enabled' in gate
    limits = messages("mps-limits.yaml")
    assert limits["dra.thread-percentage"] == [
        "active thread percentage must not be greater than 100"
    ]
    assert "invalid limit: default value set too low: 512Ki" in limits["dra.memory-limit"][0]
    strict = messages("config-strictly-decoded.yaml")
    assert 'strict decoding error: unknown field "sharng"' in strict["dra.config-unknown-field"][0]


def test_api_server_wording_reaches_the_user() -> None:
    shape = messages("request-shape.yaml")
    assert shape["dra.count"][0] == "count: Invalid value: 0: must be greater than zero"
    assert shape["dra.count"][1].endswith("must not be specified when allocationMode is 'All'")
    kinds = messages("request-without-kind.yaml")
    assert kinds["dra.request-kind"] == [
        "exactly one of `exactly` or `firstAvailable` is required",
        "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
    ]
    refs = messages("config-names-a-missing-request.yaml")
    assert refs["dra.unknown-request"][0].startswith(
        'requests: Invalid value: "mps_gpu": must be the name of a request in the claim'
    )


def test_feature_gate_hint_names_the_helm_value() -> None:
    _, report = produced(EXAMPLES / "valid" / "mps-claim-template.yaml")
    (gate,) = report.findings
    assert gate.severity is Severity.WARNING
    assert "featureGates.MPSSupport=true" in gate.hint


def test_list_items_are_validated_one_by_one() -> None:
    _, report = produced(EXAMPLES / "invalid" / "gpuconfig-for-mig-devices.yaml")
    assert report.documents[0].kind == "list"
    assert report.documents[0].keys == (("0", "dra"), ("1", "dra"))
    pointers = sorted(f.pointer for f in report.findings if f.code == "dra.config-device-kind")
    assert pointers == [
        "/items/0/spec/devices/config/0/opaque/parameters/kind",
        "/items/1/spec/config/0/opaque/parameters/kind",
    ]


def test_a_class_defined_in_the_same_file_decides_the_device_kind() -> None:
    text = (EXAMPLES / "valid" / "first-available-and-classes.yaml").read_text("utf-8")
    wrong = text.replace("kind: MigDeviceConfig", "kind: GpuConfig")
    report = validation.validate_text(wrong, "claim.yaml")
    (finding,) = [f for f in report.findings if f.code == "dra.config-device-kind"]
    assert "request 'gpu/migs' uses DeviceClass a100-mig" in finding.message
    # Without the class in the file, its kind is unknown and nothing is claimed about it.
    alone = wrong.split("- apiVersion: resource.k8s.io/v1\n  kind: ResourceClaim")[1]
    claim_only = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim" + alone.replace("\n  ", "\n")
    report = validation.validate_text(claim_only, "claim.yaml")
    assert report.documents[0].kind == "dra"
    assert "dra.feature-gate" in {f.code for f in report.findings}
    assert "dra.config-device-kind" not in {f.code for f in report.findings}


MIXED = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: mixed}
spec:
  devices:
    requests:
    - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}
    - {name: mig, exactly: {deviceClassName: mig.nvidia.com}}
    - name: either
      firstAvailable:
      - {name: whole, deviceClassName: gpu.nvidia.com}
      - {name: slice, deviceClassName: mig.nvidia.com}
    config:
    - requests: REQUESTS
      opaque:
        driver: gpu.nvidia.com
        parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig}
"""


@pytest.mark.parametrize(
    ("requests", "misfits"),
    [
        ("[]", 0),  # unnamed: applies to the whole GPUs, skipped for the MIG devices
        ("[either]", 0),  # a request with alternatives: fits one of them
        ("[mig]", 1),  # named, one MIG request: NodePrepareResources fails
        ("[either/slice]", 1),  # one alternative, a MIG one
        ("[mig, either/whole]", 1),
    ],
)
def test_a_config_is_wrong_for_its_devices_only_where_the_driver_would_fail_or_skip_it(
    requests: str, misfits: int
) -> None:
    report = validation.validate_text(MIXED.replace("REQUESTS", requests), "claim.yaml")
    found = [f for f in report.findings if f.code == "dra.config-device-kind"]
    assert len(found) == misfits
    assert all("NodePrepareResources fails" in f.message for f in found)


def test_an_unnamed_config_that_fits_none_of_the_claims_devices_never_takes_effect() -> None:
    only_mig = MIXED.replace("REQUESTS", "[]").split("    - {name: gpu,")[0] + (
        "    - {name: mig, exactly: {deviceClassName: mig.nvidia.com}}\n"
        "    config:\n    - opaque:\n        driver: gpu.nvidia.com\n"
        "        parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig}\n"
    )
    report = validation.validate_text(only_mig, "claim.yaml")
    [found] = [f for f in report.findings if f.code == "dra.config-device-kind"]
    assert "never takes effect" in found.message
