"""`kubectl gpu mig validate` as a user drives it: models, nodes (read from the real
kube-apiserver), exit codes, JSON contract."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest

from kubectl_gpu import cluster
from tests.conftest import ROOT, CliResult
from tests.kit.kube import objects
from tests.kit.plane.plane import ControlPlane

Run = Callable[..., CliResult]
DEFAULT = str(
    ROOT / "tests" / "data" / "mig" / "mig-parted__deployments__systemd__config-default.yaml"
)
SCHEMA = json.loads((ROOT / "schemas" / "mig-validate-result.v1.json").read_text())


def validate(run_cli: Run, *args: str) -> CliResult:
    return run_cli("mig", "validate", "-f", DEFAULT, *args)


def test_a_config_that_fits_exits_0(run_cli: Run) -> None:
    result = validate(run_cli, "-c", "all-balanced", "--gpu", "NVIDIA H100 80GB HBM3")
    assert result.exit_code == 0, result.stderr
    assert "all-balanced  NVIDIA H100 80GB HBM3  0      H100-80GB  fits" in result.stdout
    assert "2g.20gb@0:2 1g.10gb@2:1 1g.10gb@3:1 3g.40gb@4:4" in result.stdout
    assert "1 of 1 fit" in result.stderr


@pytest.mark.parametrize("model", ["NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3", "0x233010DE"])
def test_a_model_is_named_by_product_gfd_label_or_pci_id(run_cli: Run, model: str) -> None:
    result = validate(run_cli, "-c", "all-1g.5gb", "--gpu", model)
    assert result.exit_code == 1
    assert (
        "profile 1g.5gb does not exist on NVIDIA H100 80GB HBM3 (its profiles: 1g.10gb, "
        "1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)"
    ) in result.stdout


def test_an_unknown_model_is_a_usage_error_listing_the_known_ones(run_cli: Run) -> None:
    result = validate(run_cli, "--gpu", "H100")
    assert result.exit_code == 2
    assert "error: unknown GPU model 'H100'" in result.stderr
    assert "did you mean 'H100-80GB' or 'H100-94GB' or 'H100-96GB'?" in result.stderr
    assert "NVIDIA A30" in result.stderr and result.stdout == ""


def test_any_config_that_does_not_fit_makes_the_exit_status_1(run_cli: Run) -> None:
    result = validate(run_cli, "-c", "all-balanced", "-c", "all-1g.5gb", "--gpu", "A100-40GB")
    assert result.exit_code == 0
    result = validate(run_cli, "-c", "all-balanced", "-c", "all-1g.5gb", "--gpu", "A30")
    assert result.exit_code == 1
    assert "1 of 2 fit" in result.stderr


def test_json_output_follows_the_schema(run_cli: Run) -> None:
    result = validate(run_cli, "--gpu", "A100-40GB", "--gpu", "A30", "-o", "json")
    document = result.json
    jsonschema.validate(document, SCHEMA)
    assert result.exit_code == 1 and document["fits"] is False
    assert len(document["results"]) == 81 * 2
    balanced = next(
        r for r in document["results"] if (r["config"], r["target"]) == ("all-balanced", "A30")
    )
    assert balanced["resources"] == {"nvidia.com/mig-1g.6gb": 2, "nvidia.com/mig-2g.12gb": 1}
    assert [(i["profile"], i["placement"]) for i in balanced["gpus"][0]["instances"]] == [
        ("2g.12gb", {"start": 0, "size": 2}),
        ("1g.6gb", {"start": 2, "size": 1}),
        ("1g.6gb", {"start": 3, "size": 1}),
    ]


def test_yaml_output_is_the_same_document(run_cli: Run) -> None:
    import yaml

    as_json = validate(run_cli, "-c", "all-balanced", "--gpu", "B200", "-o", "json").json
    as_yaml = yaml.safe_load(
        validate(run_cli, "-c", "all-balanced", "--gpu", "B200", "-o", "yaml").stdout
    )
    assert as_yaml == as_json


def test_the_strategy_check_fails_a_layout_the_plugin_would_refuse(run_cli: Run) -> None:
    result = validate(run_cli, "-c", "all-balanced", "--gpu", "A30", "--strategy", "single")
    assert result.exit_code == 1
    assert "more than one MIG device type present on node (1g.6gb, 2g.12gb)" in result.stdout
    result = validate(
        run_cli, "-c", "all-1g.6gb", "--gpu", "A30", "--count", "4", "--strategy", "single"
    )
    assert result.exit_code == 0
    assert "0-3" in result.stdout


def test_an_invalid_config_file_is_reported_with_its_line(run_cli: Run, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "version: v1\nmig-configs:\n  x:\n    - devices: some\n      mig-enabled: true\n"
    )
    result = run_cli("mig", "validate", "-f", str(bad), "--gpu", "A30")
    assert result.exit_code == 1
    # validation's one wording: the first error with its line and path, and the hint
    assert f"error: {bad} line 4, at /mig-configs/x/0/devices: " in result.stderr
    assert "hint: kubectl gpu validate -f FILE lists every problem" in result.stderr


def test_an_unknown_config_name_is_named(run_cli: Run) -> None:
    result = validate(run_cli, "-c", "all-balance", "--gpu", "A30")
    assert result.exit_code == 1
    assert "selected mig-config not present: all-balance" in result.stderr
    assert "did you mean 'all-balanced'?" in result.stderr


@pytest.mark.parametrize(
    "args",
    [[], ["--gpu", "A30", "--node", "n1"], ["--node", "n1", "--count", "2"]],
)
def test_the_targets_must_be_given_one_way(run_cli: Run, args: list[str]) -> None:
    result = validate(run_cli, *args)
    assert result.exit_code == 2
    assert result.stdout == ""


@pytest.fixture
def admin(module_plane: ControlPlane, real_control_plane: None) -> Path:
    """The administrator's, on the real server (the module's nodes go when it ends)."""
    return module_plane.kubeconfig


def add_node(kubeconfig: Path, node: dict[str, object]) -> None:
    cluster.connect(str(kubeconfig)).create(cluster.path("nodes"), node)


def test_a_node_is_read_from_its_gfd_labels_and_a_cpu_node_is_refused(
    run_cli: Run, admin: Path
) -> None:
    labels = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.count": "8"}
    add_node(admin, objects.node("gpu-1", labels=labels))
    add_node(admin, objects.node("cpu-1"))
    result = validate(run_cli, "-c", "all-1g.10gb", "--node", "gpu-1", "--kubeconfig", str(admin))
    assert result.exit_code == 0, result.stderr
    assert "all-1g.10gb  gpu-1     0-7    A100-80GB  fits" in result.stdout
    result = validate(run_cli, "--node", "cpu-1", "--kubeconfig", str(admin))
    assert result.exit_code == 1
    assert "error: node cpu-1 is not a GPU node" in result.stderr
    result = validate(run_cli, "--node", "gone", "--kubeconfig", str(admin))
    assert result.exit_code == 1 and "not found" in result.stderr


def test_a_node_known_only_from_its_agent_and_its_strategy_gets_the_verdict_apply_gives(
    run_cli: Run, admin: Path
) -> None:
    # No GFD: the agent's report names the GPUs; the device plugin runs MIG strategy single,
    # which refuses a node with several profiles (mig apply refuses it for that reason too).
    gpus = [{"index": i, "pci": "0x20B510DE", "name": "NVIDIA A100-SXM4-80GB"} for i in (0, 1)]
    node = objects.node("gpu-2", labels={"nvidia.com/mig.strategy": "single"})
    node["metadata"]["annotations"] = {"kubectl-gpu.io/mig.gpus": json.dumps(gpus)}
    add_node(admin, node)

    balanced = validate(run_cli, "-c", "all-balanced", "--node", "gpu-2",
                        "--kubeconfig", str(admin))  # fmt: skip
    uniform = validate(run_cli, "-c", "all-1g.10gb", "--node", "gpu-2",
                       "--kubeconfig", str(admin))  # fmt: skip
    told = validate(run_cli, "-c", "all-balanced", "--node", "gpu-2", "--strategy", "mixed",
                    "--kubeconfig", str(admin))  # fmt: skip

    assert balanced.exit_code == 1, balanced.stderr
    assert "single" in balanced.stdout + balanced.stderr
    assert uniform.exit_code == 0, uniform.stderr
    assert "all-1g.10gb  gpu-2     0-1    A100-80GB  fits" in uniform.stdout
    assert told.exit_code == 0, told.stderr  # --strategy says what the plugin will run


PROBE = """
import sys
from kubectl_gpu.cli import cli
try:
    cli.main({args!r}, standalone_mode=False)
except SystemExit:
    pass
print("kubernetes" in sys.modules)
"""


@pytest.mark.parametrize(
    "args",
    [
        ["mig", "--help"],
        ["mig", "validate", "--help"],
        ["mig", "validate", "-f", DEFAULT, "--gpu", "A30"],
        ["mig", "profiles"],
    ],
)
def test_help_and_offline_checks_never_import_the_kubernetes_client(args: list[str]) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=args)], capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip().splitlines()[-1] == "False", out.stderr
