"""`kubectl gpu validate` on DRA objects, as a user drives it: a claim from a file, a List
piped from `kubectl get -o yaml`, exit codes, and the JSON verdict."""

from __future__ import annotations

import json
from collections.abc import Callable

import jsonschema

from tests.conftest import ROOT, CliResult

Run = Callable[..., CliResult]
EXAMPLES = ROOT / "examples" / "dra"


def test_a_good_claim_exits_0(run_cli: Run) -> None:
    result = run_cli("validate", "-f", str(EXAMPLES / "valid" / "whole-gpu-claim.yaml"))
    assert result.exit_code == 0, result.stderr
    assert "whole-gpu-claim.yaml: valid (dra)" in result.stdout


def test_a_feature_gate_warning_fails_only_under_strict(run_cli: Run) -> None:
    path = str(EXAMPLES / "valid" / "mps-claim-template.yaml")
    assert run_cli("validate", "-f", path).exit_code == 0
    strict = run_cli("validate", "-f", path, "--strict")
    assert strict.exit_code == 1
    assert "featureGates.MPSSupport=true" in strict.stdout + strict.stderr


def test_a_bad_claim_exits_1_naming_line_and_field(run_cli: Run) -> None:
    path = EXAMPLES / "invalid" / "v1beta1-fields-in-a-v1-claim.yaml"
    result = run_cli("validate", "-f", str(path))
    assert result.exit_code == 1
    out = result.stdout + result.stderr
    assert f'{path}:14:7: error: unknown field "spec.devices.requests[0].deviceClassName"' in out
    assert "deviceClassName belongs under exactly:" in out
    assert "Traceback" not in out


def test_json_verdict_matches_its_schema_and_names_the_list_items(run_cli: Run) -> None:
    path = str(EXAMPLES / "invalid" / "gpuconfig-for-mig-devices.yaml")
    result = run_cli("validate", "-f", path, "-o", "json")
    assert result.exit_code == 1
    verdict = json.loads(result.stdout)
    schema = json.loads((ROOT / "schemas" / "validate-result.v1.json").read_text("utf-8"))
    jsonschema.validate(verdict, schema)
    (file,) = verdict["files"]
    assert file["documents"][0]["kind"] == "list"
    codes = {(f["code"], f["line"]) for f in file["findings"]}
    assert ("dra.config-device-kind", 25) in codes
