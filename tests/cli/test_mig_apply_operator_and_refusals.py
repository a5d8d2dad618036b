"""`kubectl gpu mig apply` where the GPU Operator's MIG manager manages the node (it is driven
through its ConfigMap and `nvidia.com/mig.config`, never ours), never with two actuators on one
node, and the refusals a user meets: a 403 naming the permission, an unknown node, and a
`--dry-run=client -o yaml` that prints what would be written and writes nothing."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from kubectl_gpu import keys
from tests.agent.fixtures import agent_pod, labels
from tests.conftest import CliResult
from tests.kit.cluster import SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import ApiError, layouts
from tests.kit.kube import manifests as m

pytestmark = pytest.mark.timeout(120)  # clusters on the real control plane

Run = Callable[..., CliResult]
ALL_3G = {"3g.40gb": 2}
OPERATOR_CM = ("configmaps", "default-mig-parted-config", "gpu-operator")


def write_config(tmp_path: Path, name: str, devices: dict[str, int]) -> str:
    spec = {"devices": "all", "mig-enabled": True, "mig-devices": devices}
    path = tmp_path / "mig.yaml"
    path.write_text(yaml.safe_dump({"version": "v1", "mig-configs": {name: [spec]}}))
    return str(path)


def gpu(cluster: SimCluster, run_cli: Run, *args: str) -> CliResult:
    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "mig", *args)
    assert result.exception is None, result.exception
    return result


def our_configmaps(cluster: SimCluster) -> list[str]:
    """ConfigMaps in our namespace but the CA bundle the real server puts in every one."""
    found = cluster.client.list("configmaps", keys.NAMESPACE)
    return [c["metadata"]["name"] for c in found if c["metadata"]["name"] != "kube-root-ca.crt"]


@pytest.fixture
def operator(sim_cluster: MakeSimCluster) -> SimCluster:
    # no MIG manager stand-in: its pod is made and its part played by the test
    cluster = sim_cluster(["gpu-1=H100-SXM5-80GB:1"], layouts.gpu_operator(mig_strategy="mixed"))
    cluster.settle()
    assert labels(cluster, "gpu-1").get(keys.DEPLOY_MIG_MANAGER_LABEL) == "true"
    return cluster


@pytest.fixture
def helm(sim_cluster: MakeSimCluster) -> SimCluster:
    cluster = sim_cluster(["gpu-1=H100-SXM5-80GB:1"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    agent_pod(cluster, "gpu-1")
    return cluster


def mig_manager_pod(cluster: SimCluster) -> None:
    """The operator's MIG manager pod on gpu-1 (what `mig apply --wait` looks for first)."""
    cluster.client.create({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "nvidia-mig-manager-x1", "namespace": "gpu-operator",
                     "labels": {"app": "nvidia-mig-manager"}},
        "spec": {"nodeName": "gpu-1", "containers": [{"name": "mig", "image": "mig-manager"}]},
    })  # fmt: skip
    cluster.settle()


def play_mig_manager(cluster: SimCluster, state: str) -> threading.Thread:
    """The MIG manager's part, played: report `state` once the label asks."""

    mig_manager_pod(cluster)

    def run() -> None:
        for _ in range(200):
            if labels(cluster, "gpu-1").get(keys.MIG_CONFIG_LABEL) == "all-3g":
                body = {"metadata": {"labels": {keys.MIG_CONFIG_STATE_LABEL: state}}}
                cluster.client.patch("nodes", "gpu-1", body)
                return
            threading.Event().wait(0.02)

    thread = threading.Thread(target=run, name="mig-manager", daemon=True)
    thread.start()
    return thread


def test_an_operator_node_is_driven_through_the_operators_label_and_configmap(
    operator: SimCluster, run_cli: Run, tmp_path: Path
) -> None:
    config = write_config(tmp_path, "all-3g", ALL_3G)
    manager = play_mig_manager(operator, "success")

    result = gpu(operator, run_cli, "apply", "-f", config, "-c", "all-3g", "--node", "gpu-1",
                 "--wait", "--timeout", "20s")  # fmt: skip
    manager.join(10)

    assert result.exit_code == 0, result.stderr
    assert "gpu-operator" in result.stdout and "success" in result.stdout
    node = labels(operator, "gpu-1")
    assert node[keys.MIG_CONFIG_LABEL] == "all-3g"
    assert keys.MIG_DESIRED_LABEL not in node  # not ours
    assert our_configmaps(operator) == []
    stored = yaml.safe_load(operator.client.get(*OPERATOR_CM)["data"]["config.yaml"])
    assert stored["mig-configs"]["all-3g"][0]["mig-devices"] == ALL_3G
    status = gpu(operator, run_cli, "status", "-o", "json").json["nodes"][0]
    assert (status["actuator"], status["desired"], status["applied"], status["state"]) == (
        "gpu-operator", "all-3g", "all-3g", "success")  # fmt: skip


def test_the_operators_failure_fails_the_apply(
    operator: SimCluster, run_cli: Run, tmp_path: Path
) -> None:
    config = write_config(tmp_path, "all-3g", ALL_3G)
    manager = play_mig_manager(operator, "failed")

    result = gpu(operator, run_cli, "apply", "-f", config, "-c", "all-3g", "--node", "gpu-1",
                 "--wait", "--timeout", "20s")  # fmt: skip
    manager.join(10)

    assert result.exit_code == 1
    assert "MIG manager failed" in result.stderr


def test_a_different_config_of_the_same_name_in_the_operators_configmap_is_not_overwritten(
    operator: SimCluster, run_cli: Run, tmp_path: Path
) -> None:
    theirs = {
        "version": "v1",
        "mig-configs": {"all-3g": [{"devices": "all", "mig-enabled": False}]},
    }
    mig_manager_pod(operator)
    operator.client.create(
        m.configmap(OPERATOR_CM[1], OPERATOR_CM[2], {"config.yaml": yaml.safe_dump(theirs)})
    )
    config = write_config(tmp_path, "all-3g", ALL_3G)

    result = gpu(operator, run_cli, "apply", "-f", config, "-c", "all-3g", "--node", "gpu-1")

    assert result.exit_code == 1
    assert "already has a different config named all-3g" in result.stderr
    assert "another name" in result.stderr
    assert keys.MIG_CONFIG_LABEL not in labels(operator, "gpu-1")
    assert yaml.safe_load(operator.client.get(*OPERATOR_CM)["data"]["config.yaml"]) == theirs


def test_a_node_with_our_label_is_refused_where_the_operator_acts(
    operator: SimCluster, run_cli: Run, tmp_path: Path
) -> None:
    operator.client.patch("nodes", "gpu-1", {"metadata": {"labels": {keys.MIG_DESIRED_LABEL: "x"}}})
    config = write_config(tmp_path, "all-3g", ALL_3G)

    result = gpu(operator, run_cli, "apply", "-f", config, "-c", "all-3g", "--node", "gpu-1")

    assert result.exit_code == 1
    assert "refused" in result.stdout
    assert f"kubectl label node gpu-1 {keys.MIG_DESIRED_LABEL}-" in result.stderr
    assert keys.MIG_CONFIG_LABEL not in labels(operator, "gpu-1")
    with pytest.raises(ApiError) as missing:
        operator.client.get(*OPERATOR_CM)
    assert missing.value.code == 404


def test_a_mig_manager_label_is_refused_where_our_agent_acts(
    helm: SimCluster, run_cli: Run, tmp_path: Path
) -> None:
    helm.client.patch("nodes", "gpu-1", {"metadata": {"labels": {keys.MIG_CONFIG_LABEL: "x"}}})
    config = write_config(tmp_path, "all-3g", ALL_3G)

    result = gpu(helm, run_cli, "apply", "-f", config, "-c", "all-3g", "--node", "gpu-1")

    assert result.exit_code == 1
    assert f"remove that label first: kubectl label node gpu-1 {keys.MIG_CONFIG_LABEL}-" in (
        result.stderr
    )
    assert keys.MIG_DESIRED_LABEL not in labels(helm, "gpu-1")
    assert our_configmaps(helm) == []


def test_a_forbidden_write_names_the_permission(
    helm: SimCluster, run_cli: Run, tmp_path: Path
) -> None:
    helm.deny("patch", "nodes")
    config = write_config(tmp_path, "all-3g", ALL_3G)

    result = gpu(helm, run_cli, "apply", "-f", config, "-c", "all-3g", "--node", "gpu-1")

    assert result.exit_code == 1
    assert "Traceback" not in result.stderr
    assert "grant 'patch' on 'nodes'" in result.stderr


def test_an_unknown_node_is_named(helm: SimCluster, run_cli: Run, tmp_path: Path) -> None:
    config = write_config(tmp_path, "all-3g", ALL_3G)

    result = gpu(helm, run_cli, "apply", "-f", config, "-c", "all-3g", "--node", "gpu-9")

    assert result.exit_code == 1
    assert "node gpu-9 not found" in result.stderr
    assert our_configmaps(helm) == []


def test_client_dry_run_prints_the_objects_and_writes_nothing(
    helm: SimCluster, run_cli: Run, tmp_path: Path
) -> None:
    config = write_config(tmp_path, "all-3g", ALL_3G)

    result = gpu(helm, run_cli, "apply", "-f", config, "-c", "all-3g", "--all",
                 "--dry-run=client", "-o", "yaml")  # fmt: skip

    assert result.exit_code == 0, result.stderr
    items = {i["kind"]: i for i in yaml.safe_load(result.stdout)["items"]}
    stored = json.loads(items["ConfigMap"]["data"]["all-3g"])
    assert stored["mig-configs"]["all-3g"][0]["mig-devices"] == ALL_3G
    assert items["Node"]["metadata"]["labels"] == {keys.MIG_DESIRED_LABEL: "all-3g"}
    assert "nothing was written" in result.stderr
    assert our_configmaps(helm) == []
    assert keys.MIG_DESIRED_LABEL not in labels(helm, "gpu-1")


def test_all_takes_gpu_nodes_only_and_a_cpu_node_by_name_is_refused(
    sim_cluster: MakeSimCluster,
    run_cli: Run,
    tmp_path: Path,
) -> None:
    cluster = sim_cluster(
        ["gpu-1=H100-SXM5-80GB:1", "gpu-2=H100-SXM5-80GB:2", "cpu-1=none:0"],
        layouts.helm(env={"MIG_STRATEGY": "mixed"}),
    )
    for node in ("gpu-1", "gpu-2"):
        agent_pod(cluster, node)
    config = write_config(tmp_path, "all-3g", ALL_3G)

    everything = gpu(cluster, run_cli, "apply", "-f", config, "-c", "all-3g", "--all",
                     "--dry-run=server")  # fmt: skip
    named = gpu(cluster, run_cli, "apply", "-f", config, "-c", "all-3g", "--node", "cpu-1")

    assert everything.exit_code == 0, everything.stderr
    rows = [line.split()[0] for line in everything.stdout.splitlines()[1:]]
    assert rows == ["gpu-1", "gpu-2"]
    assert everything.stdout.count("would-apply") == 2 and "2x H100" in everything.stdout
    assert our_configmaps(cluster) == []  # a server-side dry run keeps nothing
    assert named.exit_code == 1 and "node cpu-1 is not a GPU node" in named.stderr


def test_a_wait_on_an_operator_node_without_a_mig_manager_pod_is_refused_at_the_start(
    operator: SimCluster, run_cli: Run, tmp_path: Path
) -> None:
    config = write_config(tmp_path, "all-3g", ALL_3G)

    result = gpu(operator, run_cli, "apply", "-f", config, "-c", "all-3g", "--node", "gpu-1",
                 "--wait", "--timeout", "10m")  # fmt: skip

    assert result.exit_code == 1  # at once, not after ten minutes
    assert "no GPU Operator MIG manager pod runs on gpu-1" in result.stderr
    assert keys.MIG_CONFIG_LABEL not in labels(operator, "gpu-1")
    assert OPERATOR_CM[1] not in [c["metadata"]["name"] for c in
                                  operator.client.list("configmaps", "gpu-operator")]  # fmt: skip
