"""`kubectl gpu mig plan` draws each GPU's slices and resources; `mig profiles` lists the
geometry tables and flags what is unverified."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import jsonschema

from kubectl_gpu.cli.mig.validate import draw
from kubectl_gpu.mig import models, profiles
from kubectl_gpu.mig.fit import layout
from tests.conftest import ROOT, CliResult

Run = Callable[..., CliResult]
DEFAULT = str(
    ROOT / "tests" / "data" / "mig" / "mig-parted__deployments__systemd__config-default.yaml"
)


def test_plan_draws_each_instance_over_its_memory_slices(run_cli: Run) -> None:
    result = run_cli("mig", "plan", "-f", DEFAULT, "-c", "all-balanced", "--gpu", "A100-40GB")
    assert result.exit_code == 0, result.stderr
    assert (
        "|2g.10gb          |1g.5gb  |1g.5gb  |3g.20gb                            |" in result.stdout
    )
    assert (
        "nvidia.com/mig-1g.5gb=2,nvidia.com/mig-2g.10gb=1,nvidia.com/mig-3g.20gb=1" in result.stdout
    )


def test_the_drawing_marks_free_slices() -> None:
    h100 = models.find("H100-80GB")[0]
    placed = layout(h100, [(profiles.parse("3g.40gb"), 1), (profiles.parse("1g.10gb+me"), 1)])
    free = "|".join(["." * 10] * 3)
    assert draw(placed, 8) == "|3g.40gb" + " " * 36 + "|1g.10gb+me|" + free + "|"


def test_plan_shows_resources_under_the_chosen_strategy(run_cli: Run) -> None:
    args = ("mig", "plan", "-f", DEFAULT, "-c", "all-1g.6gb", "--gpu", "A30", "--count", "2")
    result = run_cli(*args, "--strategy", "single")
    assert result.exit_code == 0
    assert "0-1    A30      nvidia.com/gpu=4" in result.stdout


def test_plan_needs_a_config_name_when_the_file_holds_several(run_cli: Run) -> None:
    result = run_cli("mig", "plan", "-f", DEFAULT, "--gpu", "A30")
    assert result.exit_code == 2
    assert "missing required flag 'selected-config'" in result.stderr


def test_plan_of_a_single_config_file_needs_no_name(run_cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "one.yaml"
    path.write_text(
        "version: v1\nmig-configs:\n  mine:\n    - devices: all\n      mig-enabled: true\n"
        '      mig-devices: {"4g.24gb": 1}\n'
    )
    result = run_cli("mig", "plan", "-f", str(path), "--gpu", "A30", "-o", "json")
    assert result.exit_code == 0
    schema = json.loads((ROOT / "schemas" / "mig-validate-result.v1.json").read_text())
    jsonschema.validate(result.json, schema)
    assert result.json["results"][0]["resources"] == {"nvidia.com/mig-4g.24gb": 1}


def test_plan_shows_why_a_gpu_gets_nothing(run_cli: Run) -> None:
    result = run_cli("mig", "plan", "-f", DEFAULT, "-c", "all-1g.35gb", "--gpu", "NVIDIA H200 NVL")
    assert result.exit_code == 1
    assert "not-covered: no spec selects this GPU" in result.stdout


def test_profiles_lists_every_model_with_placements(run_cli: Run) -> None:
    result = run_cli("mig", "profiles")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "MODEL",
        "PROFILE",
        "COMPUTE",
        "MEMORY",
        "MAX",
        "PLACEMENTS",
        "COMPUTE",
        "INSTANCES",
    ]
    assert "H100-80GB 3g.40gb 3/7 4/8 2 {0,4}:4 1c,2c" in " ".join(" ".join(lines).split())
    assert {line.split()[0] for line in lines[1:]} == {m.key for m in models.MODELS}


def test_profiles_marks_unverified_placements_with_a_note(run_cli: Run) -> None:
    result = run_cli("mig", "profiles", "--gpu", "NVIDIA RTX PRO 6000 Blackwell Server Edition")
    assert "{0,2}:2 ?" in result.stdout
    assert "note: RTX-PRO-6000: placements unverified (marked ?)" in result.stderr
    verified = run_cli("mig", "profiles", "--gpu", "A30")
    assert "?" not in verified.stdout and verified.stderr == ""


def test_profiles_json_lists_compute_instance_profiles(run_cli: Run) -> None:
    result = run_cli("mig", "profiles", "--gpu", "0x20B010DE", "-o", "json")
    (model,) = result.json["models"]
    assert model["model"] == "A100-40GB" and model["placementsVerified"] is True
    seven = next(p for p in model["profiles"] if p["name"] == "7g.40gb")
    assert seven["computeInstanceProfiles"] == [
        "1c.7g.40gb",
        "2c.7g.40gb",
        "3c.7g.40gb",
        "4c.7g.40gb",
    ]
    assert seven["placements"] == [{"start": 0, "size": 8}]


def test_profiles_of_an_unknown_model_is_a_usage_error(run_cli: Run) -> None:
    result = run_cli("mig", "profiles", "--gpu", "Tesla-T4")
    assert result.exit_code == 2
    assert "unknown GPU model 'Tesla-T4'" in result.stderr


def test_the_cli_offers_the_strategies_and_statuses_the_domain_knows() -> None:
    from kubectl_gpu.cli.mig import validate as cli_mig
    from kubectl_gpu.mig import verdicts

    assert cli_mig.STRATEGIES == verdicts.STRATEGIES
    assert {cli_mig.FITS, cli_mig.DOES_NOT_FIT} <= {s.value for s in verdicts.Status}


def test_a_count_beyond_any_node_is_a_usage_error(run_cli: Run) -> None:
    result = run_cli(
        "mig", "plan", "-f", DEFAULT, "-c", "all-balanced", "--gpu", "A30", "--count", "999"
    )
    assert result.exit_code == 2
    assert "a node has 1 to 64 GPUs, not 999" in result.stderr
