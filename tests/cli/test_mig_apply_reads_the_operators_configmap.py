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


def _as_listed(*items: dict[str, object]) -> str:
    """What `kubectl get cm -o yaml` prints: a List of the ConfigMaps."""
    return yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(items)})


def _offered(result: CliResult) -> str:
    assert result.exit_code == 1, result.stderr
    assert "selected mig-config not present: no-such" in result.stderr, result.stderr
    return result.stderr


def test_the_configmap_is_read_as_validate_reads_it_in_a_list_beside_objects_or_binary(
    run_cli: Run, tmp_path: Path
) -> None:
    """`kubectl get cm -o yaml` output, binaryData, a Deployment beside it: the same config."""
    import base64

    example = yaml.safe_load(EXAMPLE.read_text())
    inner = yaml.safe_load(example["data"]["config.yaml"])
    binary = {**example, "binaryData": {"config.yaml": base64.b64encode(
        example["data"]["config.yaml"].encode()).decode()}}  # fmt: skip
    del binary["data"]
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
    forms = {
        "list.yaml": _as_listed(example),
        "binary.yaml": yaml.safe_dump(binary),
        "beside.yaml": yaml.safe_dump_all([deployment, example]),
        "listed-binary.yaml": _as_listed(binary),
    }
    for name, text in forms.items():
        path = tmp_path / name
        path.write_text(text)
        validated = run_cli("validate", "-f", str(path))
        assert validated.exit_code == 0, (name, validated.stdout, validated.stderr)

        result = run_cli(*NOWHERE, "mig", "apply", "-f", str(path), "-c", "no-such", "--all")

        assert f"available: {', '.join(inner['mig-configs'])}" in _offered(result), name


def test_a_list_of_two_configmaps_holding_config_yaml_is_refused_naming_both(
    run_cli: Run, tmp_path: Path
) -> None:
    example = yaml.safe_load(EXAMPLE.read_text())
    other = {**example, "metadata": {"name": "other-mig-config"}}
    path = tmp_path / "two.yaml"
    path.write_text(_as_listed(example, other))

    result = run_cli(*NOWHERE, "mig", "apply", "-f", str(path), "-c", "no-such", "--all")

    assert result.exit_code == 1
    assert "2 ConfigMaps hold config.yaml" in result.stderr
    assert "other-mig-config" in result.stderr and "kubectl get cm NAME -o yaml" in result.stderr
