"""Output as kubectl users script it: `-o jsonpath=…`, `-o name`, `--no-headers`, kubectl's
wording for an unknown format, and one JSON shape family (`apiVersion`, `kind`, and `items` for
lists) for every command's `-o json`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kubectl_gpu.cli import jsonpath
from kubectl_gpu.errors import UsageError
from tests.conftest import DATA, CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

Run = Callable[..., CliResult]
pytestmark = pytest.mark.timeout(120)  # clusters on the real control plane
CHECKPOINT = str(DATA / "checkpoints" / "time-sliced-4x.json")
MIG_DEFAULT = str(DATA / "mig" / "mig-parted__deployments__systemd__config-default.yaml")
DOC: dict[str, Any] = {
    "kind": "GPUMap",
    "items": [
        {"node": "a", "labels": {"nvidia.com/gpu.product": "H100"}, "replica": 0},
        {"node": "b", "labels": {}, "replica": None, "ok": True},
    ],
}


@pytest.mark.parametrize(
    ("template", "printed"),
    [
        ("{.kind}", "GPUMap"),
        ("{.items[*].node}", "a b"),
        ("{.items[-1].node}", "b"),
        ("{.items[0:1].node}", "a"),
        ("{.items[0].labels['nvidia.com/gpu.product']}", "H100"),
        ('{range .items[*]}{.node}={.replica}{"\\n"}{end}', "a=0\nb=null\n"),
        ("nodes: {..node}", "nodes: a b"),
        ("{.items[1].ok} {.items[0].labels}", 'true {"nvidia.com/gpu.product":"H100"}'),
    ],
)
def test_jsonpath_templates_print_as_kubectl_prints(template: str, printed: str) -> None:
    assert jsonpath.render(template, DOC) == printed


@pytest.mark.parametrize(
    ("template", "says"),
    [
        ("{.items[0].gpu}", "gpu is not found"),
        ("{.items[?(@.node=='a')]}", "filters"),
        ("{range .items[*]}{.node}", "without {end}"),
        ("{.kind", "unclosed"),
    ],
)
def test_a_jsonpath_that_cannot_be_read_is_a_usage_error(template: str, says: str) -> None:
    with pytest.raises(UsageError, match=says.replace("{", r"\{").replace("?", r"\?")):
        jsonpath.render(template, DOC)


def test_offline_commands_take_jsonpath_no_headers_and_refuse_name(run_cli: Run) -> None:
    ids = run_cli("map", "--checkpoint", CHECKPOINT, "-o", "jsonpath={.items[*].replica}")
    table = run_cli("map", "--checkpoint", CHECKPOINT)
    bare = run_cli("map", "--checkpoint", CHECKPOINT, "--no-headers")
    named = run_cli("map", "--checkpoint", CHECKPOINT, "-o", "name")
    bogus = run_cli("map", "--checkpoint", CHECKPOINT, "-o", "jsn")

    assert ids.exit_code == 0, ids.stderr
    assert ids.stdout.split() == ["0", "1", "2", "3"]
    assert table.stdout.splitlines()[0].startswith("NODE")
    assert bare.stdout.splitlines() == table.stdout.splitlines()[1:]
    assert named.exit_code == 2 and "-o name is not available" in named.stderr
    assert bogus.exit_code == 2
    assert "unable to match a printer suitable for the output format 'jsn'" in bogus.stderr


@pytest.mark.parametrize(
    ("args", "kind"),
    [
        (["validate", "-f", MIG_DEFAULT], "ValidationResult"),
        (["mig", "validate", "-f", MIG_DEFAULT, "-c", "all-balanced", "--gpu", "A30"], None),
        (["mig", "profiles", "--gpu", "A30"], None),
        (["map", "--checkpoint", CHECKPOINT], "GPUMap"),
    ],
)
def test_every_offline_json_document_names_its_api_version_and_kind(
    run_cli: Run, args: list[str], kind: str | None
) -> None:
    result = run_cli(*args, "-o", "json")
    assert result.json["apiVersion"] == "kubectl-gpu.io/v1"
    assert kind is None or result.json["kind"] == kind


@pytest.fixture
def cluster(sim_cluster: MakeSimCluster) -> SimCluster:
    return sim_cluster([NodeSpec("gpu-a", "L4", 1)], "gpu-operator")


@pytest.mark.parametrize(
    ("args", "kind"),
    [
        (["share", "show"], "ShareStatus"),
        (["mig", "status"], None),
        (["doctor"], "DoctorResult"),
        (["status"], "InstallStatus"),
        (["install", "--dry-run=server"], "InstallResult"),
        (["map", "-A"], "GPUMap"),
    ],
)
def test_every_cluster_json_document_names_its_api_version_and_kind(
    run_cli: Run, cluster: SimCluster, args: list[str], kind: str | None
) -> None:
    result = run_cli("--kubeconfig", str(cluster.kubeconfig), *args, "-o", "json")
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.json["apiVersion"] == "kubectl-gpu.io/v1", result.stdout + result.stderr
    assert kind is None or result.json["kind"] == kind
    if kind in ("InstallResult", "GPUMap"):
        assert isinstance(result.json["items"], list)


def test_cluster_commands_print_type_slash_name(run_cli: Run, cluster: SimCluster) -> None:
    gpu = ("--kubeconfig", str(cluster.kubeconfig))
    assert run_cli(*gpu, "share", "show", "-o", "name").stdout == "node/gpu-a\n"
    parts = run_cli(*gpu, "status", "-o", "name").stdout.splitlines()
    assert "namespace/kubectl-gpu" in parts and "daemonset/kubectl-gpu-agent" in parts
    installed = run_cli(*gpu, "install", "--dry-run=server", "-o", "name").stdout.splitlines()
    assert "daemonset/kubectl-gpu-agent" in installed


@pytest.mark.parametrize(
    ("args", "first_line"),
    [
        (["map", "--bogus"], "error: No such option '--bogus'"),
        (["nosuch"], "error: No such command 'nosuch'."),
        (["share", "--replicas", "x"], "error: Invalid value for '--replicas'"),
    ],
)
def test_usage_mistakes_read_like_every_other_error(
    run_cli: Run, args: list[str], first_line: str
) -> None:
    result = run_cli(*args)
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0].startswith(first_line) and lines[1].startswith("hint: see 'kubectl gpu")
