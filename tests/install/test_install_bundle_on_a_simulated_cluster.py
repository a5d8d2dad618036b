"""`kubectl gpu install | status | uninstall` against a simulated cluster with no device plugin.

Three GPU nodes (one with the nvidia.com/gpu taint) and a CPU node; the bundle must bring
NVIDIA's device plugin and our agent to every GPU node and nowhere else, `status` must say
so, a second install must change nothing, and uninstall must leave nothing of ours.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kubectl_gpu import bundle, keys
from kubectl_gpu.sharing import deployment
from kubectl_gpu.workflows.install import objects
from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import ApiError

Run = Callable[..., CliResult]
pytestmark = pytest.mark.timeout(120)  # each test starts a cluster on a real control plane
GPU_NODES = ("gpu-a", "gpu-b", "gpu-c")
RESOURCES = objects.RESOURCES  # kind → the resource name the server serves it by


@pytest.fixture
def cluster(sim_cluster: MakeSimCluster) -> SimCluster:
    return sim_cluster(
        [
            NodeSpec("gpu-a", "H100-SXM5-80GB", 2),
            NodeSpec("gpu-b", "L4", 1, gpu_taint=True),
            NodeSpec("gpu-c", "A100-SXM4-40GB", 1),
            NodeSpec("cpu-1"),
        ],
    )


def gpu(run_cli: Run, cluster: SimCluster, *args: str) -> CliResult:
    return run_cli("--kubeconfig", str(cluster.kubeconfig), *args)


def report_from_agent(cluster: SimCluster, node: str) -> None:
    """What the agent on `node` publishes, written here unless the node's agent process,
    started by the install, already wrote its own."""
    try:
        create_report(cluster, node)
    except ApiError as e:
        if e.code != 409:  # 409: the node's agent wrote its own first
            raise


def create_report(cluster: SimCluster, node: str) -> None:
    cluster.client.create(
        {
            "apiVersion": "kubectl-gpu.io/v1",
            "kind": "GPUNodeReport",
            "metadata": {"name": node},
            "spec": {"node": node},
            # every field the CRD's schema requires (the real server enforces it)
            "status": {
                "agentVersion": "test", "generatedAt": "2026-01-01T00:00:00Z",
                "digest": "sha256:" + "0" * 64, "gpuCount": 0, "allocationCount": 0,
                "gpus": [], "allocations": [], "findings": [],
                "registered": {"source": "podresources", "resources": []},
                "allocatable": {"source": "podresources", "resources": []},
            },
        }
    )  # fmt: skip


def stored(cluster: SimCluster, obj: dict[str, Any]) -> dict[str, Any] | None:
    kind, namespace, name = bundle.identity(obj)
    try:
        return cluster.client.get(RESOURCES[kind], name, namespace)
    except ApiError:
        return None


def ours(cluster: SimCluster) -> list[tuple[str, str, str]]:
    objects = bundle.render(bundle.Options())
    return [bundle.identity(o) for o in objects if stored(cluster, o) is not None]


def test_bundle_install_is_ready_on_every_gpu_node_and_status_is_green(
    run_cli: Run, cluster: SimCluster
) -> None:
    result = gpu(run_cli, cluster, "install")
    assert result.exit_code == 0, result.stderr
    assert "daemonset/kubectl-gpu-device-plugin -n kubectl-gpu created" in result.stdout
    assert "daemonset/kubectl-gpu-agent -n kubectl-gpu created" in result.stdout
    cluster.settle(10)
    for node in GPU_NODES:
        report_from_agent(cluster, node)
    assert [cluster.capacity(n) for n in GPU_NODES] == [2, 1, 1]  # the bundle's plugin runs

    status = gpu(run_cli, cluster, "status", "-o", "json")

    assert status.exit_code == 0, status.stderr
    doc = status.json
    assert doc["healthy"] and doc["mode"] == "bundle" and doc["nodesWithoutReport"] == []
    assert doc["gpuNodes"] == list(GPU_NODES)  # the CPU node is not expected to run anything
    assert {p["state"] for p in doc["parts"]} == {"ok"}
    daemonsets = {p["name"]: p["detail"] for p in doc["parts"] if p["kind"] == "DaemonSet"}
    assert daemonsets == {
        "kubectl-gpu-device-plugin": "Ready on 3/3 GPU nodes",
        "kubectl-gpu-agent": "Ready on 3/3 GPU nodes",
    }
    pods = cluster.client.list("pods", "kubectl-gpu")
    assert sorted({p["spec"]["nodeName"] for p in pods}) == list(GPU_NODES)


def test_share_finds_the_installed_bundle(run_cli: Run, cluster: SimCluster) -> None:
    assert gpu(run_cli, cluster, "install").exit_code == 0
    found = deployment.detect([], cluster.client.list("daemonsets"))
    assert (found.kind, found.namespace, found.configmap) == (
        "bundle",
        "kubectl-gpu",
        bundle.DEVICE_PLUGIN_CONFIGMAP,
    )
    assert found.default_key == keys.DEFAULT_CONFIG_KEY


def test_installing_twice_changes_nothing(run_cli: Run, cluster: SimCluster) -> None:
    assert gpu(run_cli, cluster, "install").exit_code == 0
    cluster.settle(10)
    before = {o: stored(cluster, obj) for obj in bundle.render(bundle.Options())
              for o in [bundle.identity(obj)]}  # fmt: skip

    again = gpu(run_cli, cluster, "install", "-o", "json")

    assert again.exit_code == 0, again.stderr
    assert {o["action"] for o in again.json["items"]} == {"unchanged"}
    after = {o: stored(cluster, obj) for obj in bundle.render(bundle.Options())
             for o in [bundle.identity(obj)]}  # fmt: skip
    versions = {k: (v or {})["metadata"]["resourceVersion"] for k, v in before.items()}
    assert versions == {k: (v or {})["metadata"]["resourceVersion"] for k, v in after.items()}


def test_install_repairs_drift_but_keeps_configs_share_wrote(
    run_cli: Run, cluster: SimCluster
) -> None:
    assert gpu(run_cli, cluster, "install").exit_code == 0
    shared = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
    cluster.client.patch(
        "configmaps", bundle.DEVICE_PLUGIN_CONFIGMAP, {"data": {"default": shared}},
        namespace="kubectl-gpu",
    )  # fmt: skip
    cluster.client.patch("clusterroles", bundle.AGENT, {"rules": []})  # someone widened/cut it

    result = gpu(run_cli, cluster, "install")

    assert result.exit_code == 0, result.stderr
    assert "clusterrole/kubectl-gpu-agent configured" in result.stdout
    assert "configmap/kubectl-gpu-device-plugin-configs -n kubectl-gpu unchanged" in result.stdout
    role = cluster.client.get("clusterroles", bundle.AGENT)
    assert any("nodes" in r["resources"] for r in role["rules"])
    configs = cluster.client.get("configmaps", bundle.DEVICE_PLUGIN_CONFIGMAP, "kubectl-gpu")
    assert configs["data"]["default"] == shared


def test_uninstall_leaves_nothing_of_ours(run_cli: Run, cluster: SimCluster) -> None:
    assert gpu(run_cli, cluster, "install").exit_code == 0
    cluster.settle(10)
    report_from_agent(cluster, "gpu-a")
    labels = {keys.MIG_STATE_LABEL: "success", "team": "ml"}
    cluster.client.patch("nodes", "gpu-a", {"metadata": {"labels": labels}})

    result = gpu(run_cli, cluster, "uninstall")

    assert result.exit_code == 0, result.stderr
    assert "node/gpu-a cleaned" in result.stdout
    cluster.settle(10)
    assert ours(cluster) == []
    assert cluster.client.list("pods", "kubectl-gpu") == []
    node_labels = cluster.client.get("nodes", "gpu-a")["metadata"]["labels"]
    assert not [k for k in node_labels if k.startswith(keys.PREFIX)]
    assert node_labels["team"] == "ml"  # not ours: kept
    again = gpu(run_cli, cluster, "uninstall", "-o", "json")
    assert {o["action"] for o in again.json["items"]} == {"not found"}


def test_uninstall_removes_the_per_node_config_labels_share_set(
    run_cli: Run, cluster: SimCluster
) -> None:
    assert gpu(run_cli, cluster, "install").exit_code == 0
    cluster.settle(10)
    shared = gpu(run_cli, cluster, "share", "--replicas", "2", "--node", "gpu-a")
    assert shared.exit_code == 0, shared.stderr
    label = keys.DEVICE_PLUGIN_CONFIG_LABEL
    assert cluster.client.get("nodes", "gpu-a")["metadata"]["labels"][label].startswith(
        keys.PER_NODE_KEY_PREFIX
    )
    cluster.client.patch("nodes", "gpu-c", {"metadata": {"labels": {label: "site-default"}}})

    assert gpu(run_cli, cluster, "uninstall").exit_code == 0

    # the key it named went with our ConfigMap; a value someone else set is not ours
    assert label not in cluster.client.get("nodes", "gpu-a")["metadata"]["labels"]
    assert cluster.client.get("nodes", "gpu-c")["metadata"]["labels"][label] == "site-default"


def test_status_names_what_is_missing_and_nodes_without_a_report(
    run_cli: Run, cluster: SimCluster
) -> None:
    assert gpu(run_cli, cluster, "install").exit_code == 0
    cluster.settle(10)
    report_from_agent(cluster, "gpu-a")
    report_from_agent(cluster, "gpu-b")
    cluster.client.delete("rolebindings", "kubectl-gpu-agent-plugin-restart", "kubectl-gpu")

    result = gpu(run_cli, cluster, "status")

    assert result.exit_code == 1
    row = next(line for line in result.stdout.splitlines() if "plugin-restart" in line and
               line.startswith("RoleBinding"))  # fmt: skip
    assert "missing" in row
    assert "GPU nodes without an agent report: gpu-c" in result.stderr
    assert "1 of 20 parts not ready" in result.stderr


def test_status_before_any_install_says_everything_is_missing(
    run_cli: Run, cluster: SimCluster
) -> None:
    result = gpu(run_cli, cluster, "status", "-o", "json")
    assert result.exit_code == 1
    assert {p["state"] for p in result.json["parts"]} == {"missing"}
    assert result.json["nodesWithoutReport"] == list(GPU_NODES)


def test_status_does_not_expect_the_device_plugin_on_a_node_labelled_off_it(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    """A DRA node carries `nvidia.com/gpu.deploy.device-plugin=false` (NVIDIA's DRA driver docs
    ask for it): the bundle's device plugin stays off it, the agent runs there, and `status`
    must not call the plugin "not Ready" there (it did, in the demo's DRA node)."""
    off = {keys.DEPLOY_DEVICE_PLUGIN_LABEL: "false"}
    cluster = sim_cluster(
        [NodeSpec("gpu-a", "L4", 1), NodeSpec("dra-a", "A100-SXM4-80GB", 1, labels=off)]
    )
    assert gpu(run_cli, cluster, "install").exit_code == 0
    cluster.settle(10)
    for node in ("gpu-a", "dra-a"):
        report_from_agent(cluster, node)

    status = gpu(run_cli, cluster, "status", "-o", "json")

    assert status.exit_code == 0, status.stdout + status.stderr
    daemonsets = {p["name"]: p["detail"] for p in status.json["parts"] if p["kind"] == "DaemonSet"}
    assert daemonsets == {
        "kubectl-gpu-device-plugin": "Ready on 1/1 GPU nodes",
        "kubectl-gpu-agent": "Ready on 2/2 GPU nodes",
    }
    plugin_nodes = {
        p["spec"]["nodeName"]
        for p in cluster.client.list("pods", "kubectl-gpu")
        if p["metadata"]["name"].startswith(bundle.DEVICE_PLUGIN)
    }
    assert plugin_nodes == {"gpu-a"}


def test_share_leaves_a_node_labelled_off_the_device_plugin_alone(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    """`share` changes the device plugin's config; a node the plugin is labelled off (a DRA
    node) is not part of the rollout (it refused: "restarting the device plugin would leave node
    dra-a without it", with a hint about an unfinished MIG change)."""
    off = {keys.DEPLOY_DEVICE_PLUGIN_LABEL: "false"}
    cluster = sim_cluster(
        [NodeSpec("gpu-a", "L4", 1), NodeSpec("dra-a", "A100-SXM4-80GB", 1, labels=off)]
    )
    assert gpu(run_cli, cluster, "install").exit_code == 0
    cluster.settle(10)

    result = gpu(run_cli, cluster, "share", "--replicas", "2", "--wait", "--timeout", "60s",
                 "-o", "json")  # fmt: skip

    assert result.exit_code == 0, result.stdout + result.stderr
    assert [(r["node"], r["after"], r["result"]) for r in result.json["nodes"]] == [
        ("gpu-a", 2, "verified")
    ]
    assert cluster.capacity("dra-a") == 0
