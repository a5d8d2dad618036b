"""End to end through `validation.validate_text`: every device-plugin example produces exactly
the findings its `# expect:` lines list, at those lines, and the shipped fixtures are valid."""

from __future__ import annotations

import pathlib
import re

import pytest

from kubectl_gpu import sharing, validation
from kubectl_gpu.findings import Severity

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "device-plugin"
VALID = sorted((EXAMPLES / "valid").glob("*.yaml"))
INVALID = sorted((EXAMPLES / "invalid").glob("*.yaml"))
FIXTURES = sorted((ROOT / "tests" / "data" / "device-plugin").glob("*.yaml"))
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
    assert report.documents and report.documents[0].kind in ("device-plugin-config", "configmap")


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_examples_have_an_error(path: pathlib.Path) -> None:
    text = path.read_text("utf-8")
    assert text.startswith("# expect: "), "expectations come first in the file"
    _, report = produced(path)
    assert not report.valid


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_shipped_fixtures_are_valid_without_findings(path: pathlib.Path) -> None:
    found, _ = produced(path)
    assert found == set()


def test_every_rule_is_shown_by_an_example() -> None:
    shown = set()
    for path in VALID + INVALID:
        shown |= {code for code, _ in expected(path.read_text("utf-8"))}
    assert set(sharing.RULES) <= shown
    errors = {
        code for code, (severity, _, _) in sharing.RULES.items() if severity is Severity.ERROR
    }
    in_invalid = {code for p in INVALID for code, _ in expected(p.read_text("utf-8"))}
    assert errors <= in_invalid, "every error rule has an invalid example"


def test_configmap_keys_are_validated_one_by_one() -> None:
    _, report = produced(EXAMPLES / "valid" / "configmap.yaml")
    assert report.documents[0].keys == (
        ("default", "device-plugin-config"),
        ("ts-4", "device-plugin-config"),
        ("mps-2", "device-plugin-config"),
    )


def test_upstream_wording_reaches_the_user() -> None:
    _, report = produced(EXAMPLES / "invalid" / "unknown-enum-flags.yaml")
    messages = {f.code: f.message for f in report.findings}
    assert messages["sharing.unknown-mig-strategy"] == "unknown MIG strategy: MIXED"
    assert messages["sharing.unknown-device-id-strategy"] == (
        "invalid --device-id-strategy option: index0"
    )
    _, report = produced(EXAMPLES / "invalid" / "misplaced-sharing-keys-under-flags.yaml")
    moved = [f for f in report.findings if f.code == "schema.misplaced-field"]
    assert moved[0].message == (
        "'renameByDefault' does not belong under 'flags': the device plugin ignores it and "
        "starts as if it were not written"
    )
    assert "sharing.timeSlicing.renameByDefault" in moved[0].hint
