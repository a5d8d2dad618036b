"""Failures of `kubectl gpu share` say what failed, what was left written, and what to do.

On the real control plane: each refusal is the real RBAC authorizer's 403 to a user granted
everything but that one verb (`SimCluster.deny`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.plane.ports import refused_port
from tests.kit.plane.users import plain_kubeconfig

Run = Callable[..., CliResult]
pytestmark = pytest.mark.timeout(120)  # clusters on the real control plane
NAMESPACE, CONFIGMAP = "nvidia-device-plugin", "nvdp-nvidia-device-plugin-configs"
NODES = [NodeSpec("gpu-a", "L4", 2), NodeSpec("gpu-b", "L4", 2), NodeSpec("cpu-1")]


@pytest.fixture
def cluster(sim_cluster: MakeSimCluster) -> SimCluster:
    return sim_cluster(NODES, "helm", {"any": "version: v1\n"}, "any")


def share(run_cli: Run, cluster: SimCluster, *args: str) -> CliResult:
    return run_cli("--kubeconfig", str(cluster.kubeconfig), "share", *args)


def test_forbidden_configmap_update_names_the_permission_and_writes_nothing(
    run_cli: Run, cluster: SimCluster
) -> None:
    cluster.deny("update", "configmaps")
    result = share(run_cli, cluster, "--replicas", "2")
    assert result.exit_code == 1
    assert "nothing was written" in result.stderr
    assert "grant 'update' on 'configmaps'" in result.stderr
    assert "traceback" not in result.stderr.lower()


def test_forbidden_node_label_says_what_was_already_written(
    run_cli: Run, cluster: SimCluster
) -> None:
    cluster.deny("patch", "nodes")
    result = share(run_cli, cluster, "--replicas", "2", "--node", "gpu-b", "--node", "gpu-a")
    assert result.exit_code == 1
    assert (
        f"wrote ConfigMap {NAMESPACE}/{CONFIGMAP}, then failed to label node gpu-a" in result.stderr
    )
    assert "Nodes that keep their previous key: gpu-a, gpu-b" in result.stderr
    assert "grant 'patch' on 'nodes'" in result.stderr
    assert "kubectl gpu share rollback" in result.stderr
    labels = cluster.client.get("nodes", "gpu-a")["metadata"]["labels"]
    assert (
        "nvidia.com/device-plugin.config" not in labels
    )  # consistent: no node selects anything new


def test_forbidden_pod_delete_is_reported(run_cli: Run, cluster: SimCluster) -> None:
    cluster.deny("delete", "pods")
    result = share(run_cli, cluster, "--replicas", "2")
    assert result.exit_code == 1
    assert "grant 'delete' on 'pods'" in result.stderr


def test_an_unreachable_api_server_is_one_line(run_cli: Run, tmp_path: Path) -> None:
    with refused_port() as port:
        config = plain_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{port}")
        result = run_cli("--kubeconfig", str(config), "share", "--replicas", "2")
    assert result.exit_code == 1
    assert (
        "cannot reach the API server" in result.stderr and "kubectl cluster-info" in result.stderr
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--replicas", "1"), "--replicas must be a whole number of at least 2, not 1"),
        (("--replicas", "0"), "not 0"),
        (("--replicas", "-2"), "not -2"),
        (("--replicas", "two"), "'two' is not a valid integer"),
        ((), "missing --replicas"),
        (("--replicas", "2", "--node", "a", "-l", "x=y"), "use either --node or -l"),
        (("--replicas", "60", "--mps"), "60 > 48"),
        (("--replicas", "2", "--timeout", "soon"), "'soon' is not a duration"),
    ],
)
def test_bad_input_exits_2_before_reaching_the_cluster(
    run_cli: Run, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    nowhere = plain_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")
    result = run_cli("--kubeconfig", str(nowhere), "share", *args)
    assert result.exit_code == 2, result.stderr
    assert message in result.stderr


def test_unknown_node_names_are_listed(run_cli: Run, cluster: SimCluster) -> None:
    result = share(run_cli, cluster, "--replicas", "2", "--node", "gpu-a,nope,gone")
    assert result.exit_code == 2
    assert "node(s) not found: gone, nope" in result.stderr


def test_a_node_without_gpus_is_refused(run_cli: Run, cluster: SimCluster) -> None:
    result = share(run_cli, cluster, "--replicas", "2", "--node", "cpu-1")
    assert result.exit_code == 2 and "node cpu-1 has no NVIDIA GPU" in result.stderr


def test_a_selector_skips_nodes_without_gpus(run_cli: Run, cluster: SimCluster) -> None:
    result = share(
        run_cli,
        cluster,
        "--replicas",
        "2",
        "-l",
        "kubernetes.io/os!=windows",
        "--wait",
        "-o",
        "json",
    )
    assert result.exit_code == 0, result.stderr
    assert sorted(r["node"] for r in result.json["nodes"]) == ["gpu-a", "gpu-b"]
    assert "skipping node cpu-1: it has no NVIDIA GPU" in result.stderr


def test_the_static_manifest_gets_exact_instructions(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster(NODES[:1], "static")
    result = share(run_cli, cluster, "--replicas", "2")
    assert result.exit_code == 1
    assert "(static manifest) cannot take a sharing config" in result.stderr
    assert "hint: edit the DaemonSet's pod template" in result.stderr
    assert "CONFIG_FILE=/config/config.yaml" in result.stderr


def test_help_of_every_share_command_stays_light() -> None:
    from tests.test_packaging import imported_by

    for args in (["share", "--help"], ["share", "show", "--help"], ["share", "off", "--help"]):
        assert imported_by(args) == [], args


def test_off_takes_no_replicas(run_cli: Run, cluster: SimCluster) -> None:
    result = share(run_cli, cluster, "off", "--replicas", "2")
    assert result.exit_code == 2 and "No such option '--replicas'" in result.stderr


def test_forbidden_cluster_policy_patch_says_the_configmap_was_written(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster(NODES[:1], "gpu-operator")
    cluster.deny("patch", "clusterpolicies", group="nvidia.com")
    result = share(run_cli, cluster, "--replicas", "2")
    assert result.exit_code == 1
    assert (
        "wrote ConfigMap gpu-operator/device-plugin-config, then failed to update ClusterPolicy "
        "cluster-policy" in result.stderr
    )
    assert "No plugin pod was restarted" in result.stderr
    assert "grant 'patch' on 'clusterpolicies' (API group nvidia.com)" in result.stderr


def test_a_user_who_may_not_read_cluster_policies_shares_a_helm_plugin(
    run_cli: Run, cluster: SimCluster
) -> None:
    # no node carries the GPU Operator's labels: there is no ClusterPolicy to need
    cluster.deny("list", "clusterpolicies", group="nvidia.com")

    result = share(run_cli, cluster, "--replicas", "2")

    assert result.exit_code == 0, result.stderr
    data = cluster.client.get("configmaps", CONFIGMAP, NAMESPACE)["data"]
    assert "replicas: 2" in data["any"]


def test_reading_cluster_policies_is_required_where_the_operator_manages_a_node(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster(NODES[:1], "gpu-operator")
    cluster.deny("list", "clusterpolicies", group="nvidia.com")

    result = share(run_cli, cluster, "--replicas", "2", "--dry-run=client")

    assert result.exit_code == 1
    assert "the GPU Operator manages node gpu-a" in result.stderr
    assert "grant 'list' on 'clusterpolicies' (API group nvidia.com)" in result.stderr


def test_a_client_dry_run_says_it_does_not_check_rights(run_cli: Run, cluster: SimCluster) -> None:
    # planned by a user who may not write: only the API server can tell, so the client dry
    # run says so and points at --dry-run=server, which refuses as the real run would
    cluster.deny("update", "configmaps")

    client = share(run_cli, cluster, "--replicas", "2", "--dry-run")
    server = share(run_cli, cluster, "--replicas", "2", "--dry-run=server")

    assert client.exit_code == 0, client.stderr
    assert "a client dry run does not check your rights; `--dry-run=server`" in client.stderr
    assert server.exit_code == 1
    assert "grant 'update' on 'configmaps'" in server.stderr
