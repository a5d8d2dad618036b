"""`validate` on mig-parted files end to end: NVIDIA's own files pass, each example says what
it should, at the line it should."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kubectl_gpu import validation

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLES = ROOT / "examples" / "mig"
DATA = ROOT / "tests" / "data" / "mig"
EXPECT = re.compile(r"^# expect: (\S+) line (\d+)$", re.MULTILINE)

# Every rule kubectl_gpu.mig (spec, selection, companions) reports; each needs an example.
RULES = {
    "mig.bad-profile-format",
    "mig.impossible-profile",
    "mig.non-canonical-profile",
    "mig.all-counts-zero",
    "mig.zero-count",
    "mig.missing-mig-devices",
    "mig.devices-when-disabled",
    "mig.bad-device-filter",
    "mig.device-filter-form",
    "mig.duplicate-device",
    "mig.no-devices",
    "mig.config-name-not-label",
    "mig.overlapping-specs",
    "mig.too-many-me",
    "mig.hook-env-overridden",
    "mig.gpu-client-not-unit",
    "mig.gpu-client-comma",
    "mig.duplicate-gpu-client",
    "mig.unknown-version",
}


def expected(text: str) -> set[tuple[str, int]]:
    return {(code, int(line)) for code, line in EXPECT.findall(text)}


def produced(path: Path) -> set[tuple[str, int | None]]:
    report = validation.validate_text(path.read_text(), str(path))
    return {(f.code, f.line) for f in report.findings}


INVALID = sorted((EXAMPLES / "invalid").glob("*.yaml"))
VALID = sorted((EXAMPLES / "valid").glob("*.yaml"))


@pytest.mark.parametrize("path", INVALID, ids=[p.name for p in INVALID])
def test_invalid_example_produces_exactly_its_expected_findings(path: Path) -> None:
    want = expected(path.read_text())
    assert want, "an invalid example must say what it expects"
    assert produced(path) == want


@pytest.mark.parametrize("path", VALID, ids=[p.name for p in VALID])
def test_valid_example_produces_only_its_expected_warnings(path: Path) -> None:
    report = validation.validate_text(path.read_text(), str(path))
    assert report.valid
    assert {(f.code, f.line) for f in report.findings} == expected(path.read_text())


def test_every_rule_has_an_example() -> None:
    # Errors are shown in invalid/, warnings (which exit 0) in valid/warns-*.yaml.
    shown = {code for path in INVALID + VALID for code, _ in expected(path.read_text())}
    assert RULES - shown == set()


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("dgx-a100-layouts.yaml", "mig-config"),
        ("mixed-gpu-node.yaml", "mig-config"),
        ("mig-parted-hooks.yaml", "mig-parted-hooks"),
        ("gpu-clients.yaml", "mig-manager-gpu-clients"),
    ],
)
def test_examples_are_recognised_as_their_kind(name: str, kind: str) -> None:
    report = validation.validate_text((EXAMPLES / "valid" / name).read_text(), name)
    assert [d.kind for d in report.documents] == [kind]


def test_a_configmap_holding_a_mig_config_is_validated_inside() -> None:
    path = EXAMPLES / "valid" / "configmap-custom-mig-config.yaml"
    report = validation.validate_text(path.read_text(), path.name)
    assert [d.keys for d in report.documents] == [(("config.yaml", "mig-config"),)]
    broken = path.read_text().replace('"2g.20gb": 3', '"2g.20GB": 3')
    (finding,) = validation.validate_text(broken, path.name).findings
    assert finding.code == "mig.bad-profile-format"
    assert finding.line == broken.splitlines().index('            "2g.20GB": 3') + 1


NVIDIA_FILES = {
    "gpu-operator__assets__state-mig-manager__0400_configmap__config.yaml": "mig-config",
    "gpu-operator__assets__state-mig-manager__0410_configmap__clients.yaml":
        "mig-manager-gpu-clients",
    "mig-parted__deployments__systemd__config-default.yaml": "mig-config",
    "mig-parted__deployments__systemd__hooks-default.yaml": "mig-parted-hooks",
    "mig-parted__deployments__systemd__hooks-minimal.yaml": "mig-parted-hooks",
    "mig-parted__examples__config.yaml": "mig-config",
    "mig-parted__examples__dgx-station-80gb-config.yaml": "mig-config",
}  # fmt: skip


def test_every_nvidia_file_is_covered() -> None:
    assert {p.name for p in DATA.glob("*.yaml")} == set(NVIDIA_FILES)


@pytest.mark.parametrize(("name", "kind"), NVIDIA_FILES.items())
def test_nvidias_files_validate_without_any_finding(name: str, kind: str) -> None:
    report = validation.validate_text((DATA / name).read_text(), name)
    assert [d.kind for d in report.documents] == [kind]
    assert report.findings == ()


def test_upstream_wording_reaches_the_user_with_its_line() -> None:
    text = "version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n"
    (finding,) = validation.validate_text(text, "f.yaml").findings
    assert (finding.line, finding.message) == (
        5,
        "missing required field 'mig-devices' when 'mig-enabled' is true",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mig-configs:\n  a:\n    - {devices: all, mig-enabled: false}\n",
         "unable to parse with missing 'version' field"),
        ("version: v2\nmig-configs:\n  a:\n    - {devices: all, mig-enabled: false}\n",
         "unknown version: v2"),
        ("version: v1\nmig-configs: {}\n", "at least one entry in 'mig-configs' is required"),
        ("version: v1\nmig-configs:\n  all-balanced: []\n",
         "at least one entry in 'all-balanced' is required"),
        ("version: v1\nmig-configs:\n  a:\n    - {mig-enabled: false}\n",
         "missing required field: devices"),
        ("version: v1\nmig-configs:\n  a:\n    - {devices: all}\n",
         "missing required field: mig-enabled"),
        ("version: v1\nmig-configs:\n  a:\n    - {devices: some, mig-enabled: false}\n",
         "invalid string input for 'devices': some"),
        ("version: v1\nmig-configs:\n  a:\n    - {devices: all, mig-enabled: false, x: 1}\n",
         "unexpected field: x"),
    ],
)  # fmt: skip
def test_structure_errors_carry_mig_parteds_words(text: str, message: str) -> None:
    assert [f.message for f in validation.validate_text(text, "f.yaml").findings] == [message]
