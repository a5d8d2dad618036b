"""Conventions users of kubectl expect, found on a first-time user's journey: `--no-headers`
prints only rows, `doctor pod/NAME` and `doctor NS/NAME`, `kubectl gpu version`, lists under
`items`, multi-line errors on real lines, one line said once."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.cli.doctorpods import gpu_pod, run_pods
from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

Run = Callable[..., CliResult]


@pytest.fixture
def cluster(sim_cluster: MakeSimCluster) -> SimCluster:
    return sim_cluster([NodeSpec("gpu-a", "L4", 1)], "gpu-operator")


def _gpu(run_cli: Run, cluster: SimCluster, *args: str) -> CliResult:
    return run_cli("--kubeconfig", str(cluster.kubeconfig), *args)


def test_share_show_without_headers_prints_only_rows(run_cli: Run, cluster: SimCluster) -> None:
    table = _gpu(run_cli, cluster, "share", "show")
    bare = _gpu(run_cli, cluster, "share", "show", "--no-headers")

    assert bare.exit_code == table.exit_code == 0, bare.stderr
    assert bare.stdout.splitlines() == table.stdout.splitlines()[1:2]  # one node: one row
    assert bare.stdout.strip()


@pytest.mark.parametrize("written", ["pod/train", "pods/train", "ml/train"])
def test_doctor_takes_the_pod_as_kubectl_users_type_it(
    run_cli: Run, cluster: SimCluster, written: str
) -> None:
    pod = gpu_pod("train", tolerate=True)
    pod["metadata"]["namespace"] = "ml"
    cluster.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    run_pods(cluster, pod)
    extra = () if written.startswith("ml/") else ("-n", "ml")

    result = _gpu(run_cli, cluster, "doctor", written, *extra, "-o", "json")

    assert result.exception is None, result.exception
    assert 'pods "train" not found' not in result.stderr, result.stderr
    assert result.json["target"] == {"kind": "Pod", "namespace": "ml", "name": "train"}


def test_doctor_refuses_a_namespace_that_contradicts_n(run_cli: Run, cluster: SimCluster) -> None:
    result = _gpu(run_cli, cluster, "doctor", "ml/train", "-n", "other")
    assert result.exit_code == 2 and "names namespace ml, but -n says other" in result.stderr


def test_version_prints_the_client_version(run_cli: Run) -> None:
    from kubectl_gpu import __version__

    plain = run_cli("version")
    document = run_cli("version", "-o", "json")

    assert plain.exit_code == 0 and plain.stdout == f"kubectl-gpu {__version__}\n"
    assert document.json["clientVersion"]["gitVersion"] == __version__


def test_mig_status_lists_its_nodes_under_items(run_cli: Run, cluster: SimCluster) -> None:
    result = _gpu(run_cli, cluster, "mig", "status", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert [n["node"] for n in result.json["items"]] == ["gpu-a"]


def test_a_multi_line_error_prints_real_lines(run_cli: Run, cluster: SimCluster) -> None:
    result = _gpu(run_cli, cluster, "install", "--mode", "bundle")  # beside the operator
    assert result.exit_code == 1
    assert "\\n" not in result.stderr
    assert any(line.startswith("  ") and line.strip() for line in result.stderr.splitlines()), (
        result.stderr
    )


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_mps_under_the_gpu_operator_does_not_warn_about_its_own_config(
    run_cli: Run, cluster: SimCluster, dry_run: list[str]
) -> None:
    # the operator's plugin has MPS_ROOT in its environment: no flags.mpsRoot is needed
    result = _gpu(run_cli, cluster, "share", "--mps", "--replicas", "2", *dry_run)

    assert result.exit_code == 0, result.stderr
    assert "mps-root-missing" not in result.stderr and "warning" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == len(set(lines)), result.stderr  # nothing said twice


@pytest.mark.parametrize(
    ("command", "says"),
    [
        (["mig"], ["apply a", "status", "recover"]),
        (["share", "show"], ["how each GPU node shares its GPUs", "Changes nothing"]),
        (["share"], ["--dry-run", "Change nothing; say what the change would do"]),
        (["install"], ["operator: only the node agent", "bundle: the agent and our own"]),
    ],
)
def test_help_says_what_each_command_does(
    run_cli: Run, command: list[str], says: list[str]
) -> None:
    shown = " ".join(run_cli(*command, "--help").stdout.split())  # as one line: no wrapping
    for words in says:
        assert words in shown, shown
