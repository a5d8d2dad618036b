"""`mig apply -f` takes the GPU Operator's custom MIG config as users keep it: a ConfigMap
whose `config.yaml` key holds the mig-parted config (examples/mig/valid/). The file is read
and checked before any cluster is asked, so these run without one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml

from tests.conftest import CliResult

Run = Callable[..., CliResult]
EXAMPLE = Path(__file__).parents[2] / "examples/mig/valid/configmap-custom-mig-config.yaml"
NOWHERE = ("--kubeconfig", "/nonexistent/kubeconfig")


def test_the_operators_configmap_is_read_as_the_config_it_holds(run_cli: Run) -> None:
    result = run_cli(*NOWHERE, "mig", "apply", "-f", str(EXAMPLE), "-c", "no-such", "--all")

    # the names it offers come from inside config.yaml: the ConfigMap itself was understood
    assert result.exit_code == 1
    assert "selected mig-config not present: no-such" in result.stderr
    inner = yaml.safe_load(yaml.safe_load(EXAMPLE.read_text())["data"]["config.yaml"])
    assert f"available: {', '.join(inner['mig-configs'])}" in result.stderr
    assert "unexpected field: apiVersion" not in result.stderr


def test_a_configmap_without_config_yaml_names_its_keys(run_cli: Run, tmp_path: Path) -> None:
    held = yaml.safe_dump(
        {"version": "v1", "mig-configs": {"off": [{"devices": "all", "mig-enabled": False}]}}
    )
    holder = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mine"},
              "data": {"a.yaml": held, "b.yaml": held}}  # fmt: skip
    path = tmp_path / "cm.yaml"
    path.write_text(yaml.safe_dump(holder))

    result = run_cli(*NOWHERE, "mig", "apply", "-f", str(path), "-c", "off", "--all")

    assert result.exit_code == 1
    assert "the ConfigMap has no key config.yaml (keys: a.yaml, b.yaml)" in result.stderr
    assert "MIG manager reads config.yaml" in result.stderr
