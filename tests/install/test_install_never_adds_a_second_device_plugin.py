"""`kubectl gpu install` beside what already runs: the GPU Operator, NVIDIA's Helm chart, the
static manifest, another bundle. Never a second device plugin; every problem found before the
first write, in one report; install -> uninstall -> install in both modes leaves nothing; a
mode switch leaves nothing of the other mode; a failed write leaves nothing half-installed."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from kubectl_gpu import bundle
from kubectl_gpu.workflows.install import objects
from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import ApiError
from tests.kit.plane.faults import Fault, in_front_of
from tests.kit.plane.plane import wait_for

Run = Callable[..., CliResult]
pytestmark = pytest.mark.timeout(120)  # clusters on the real control plane
NODES = [NodeSpec("gpu-a", "A100-SXM4-40GB", 1), NodeSpec("gpu-b", "L4", 1), NodeSpec("cpu-1")]
HELM_DS = ("nvidia-device-plugin", "nvdp-nvidia-device-plugin")
STATIC_DS = ("kube-system", "nvidia-device-plugin-daemonset")


def gpu(run_cli: Run, cluster: SimCluster, *args: str) -> CliResult:
    return run_cli("--kubeconfig", str(cluster.kubeconfig), *args)


def plugin_daemonsets(cluster: SimCluster) -> list[tuple[str, str]]:
    """Every DaemonSet that runs NVIDIA's device plugin, GFD aside."""
    found = []
    for ds in cluster.client.list("daemonsets"):
        containers = ds["spec"]["template"]["spec"]["containers"]
        names = {c["name"] for c in containers}
        if names & {"nvidia-device-plugin-ctr", "nvidia-device-plugin"}:
            if "feature-discovery" not in ds["metadata"]["name"]:
                found.append((ds["metadata"]["namespace"], ds["metadata"]["name"]))
    return sorted(found)


def everything(cluster: SimCluster) -> dict[tuple[str, str, str], str]:
    """Every object on the server but pods, events and nodes: (resource, ns, name) -> rv."""
    kept = {}
    for resource in objects.RESOURCES.values():
        if resource in ("nodes",):
            continue
        for obj in cluster.client.list(resource):
            meta = obj["metadata"]
            kept[(resource, meta.get("namespace", ""), meta["name"])] = meta["resourceVersion"]
    return kept


def node_keys(cluster: SimCluster) -> dict[str, dict[str, Any]]:
    found = {}
    for node in cluster.client.list("nodes"):
        meta = node["metadata"]
        found[meta["name"]] = {**meta.get("labels", {}), **meta.get("annotations", {})}
    return found


def test_beside_the_gpu_operator_install_adds_the_agent_only_and_says_so(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster(NODES, "gpu-operator")
    before = plugin_daemonsets(cluster)

    result = gpu(run_cli, cluster, "install")

    assert result.exit_code == 0, result.stderr
    assert "found the GPU Operator (ClusterPolicy cluster-policy): installing the agent only " \
        "(operator mode)" in result.stderr  # fmt: skip
    cluster.settle(10)
    assert (
        plugin_daemonsets(cluster) == before == [("gpu-operator", "nvidia-device-plugin-daemonset")]
    )
    assert cluster.client.get("roles", "kubectl-gpu-agent-plugin-restart", "gpu-operator")
    status = gpu(run_cli, cluster, "status", "-o", "json")
    assert status.json["mode"] == "operator"


def test_bundle_mode_beside_the_gpu_operator_is_refused(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster(NODES, "gpu-operator")
    before = everything(cluster)
    result = gpu(run_cli, cluster, "install", "--mode", "bundle", "--replace-plugin")
    assert result.exit_code == 1
    assert "a second one would advertise the same GPUs twice" in result.stderr
    assert everything(cluster) == before


@pytest.mark.parametrize(("layout", "where"), [("helm", HELM_DS), ("static", STATIC_DS)])
def test_beside_a_helm_or_static_plugin_bundle_mode_is_refused_before_any_write(
    run_cli: Run, sim_cluster: MakeSimCluster, layout: str, where: tuple[str, str]
) -> None:
    cluster = sim_cluster(NODES, layout)
    before = everything(cluster)

    result = gpu(run_cli, cluster, "install")

    assert result.exit_code == 1
    assert f"DaemonSet {where[0]}/{where[1]}" in result.stderr
    assert "--mode operator --operator-namespace " + where[0] in result.stderr
    assert "--mode bundle --replace-plugin" in result.stderr
    assert everything(cluster) == before


@pytest.mark.parametrize(("layout", "where"), [("helm", HELM_DS), ("static", STATIC_DS)])
def test_agent_only_beside_a_helm_or_static_plugin(
    run_cli: Run, sim_cluster: MakeSimCluster, layout: str, where: tuple[str, str]
) -> None:
    cluster = sim_cluster(NODES, layout)
    result = gpu(run_cli, cluster, "install", "--mode", "operator")
    assert result.exit_code == 0, result.stderr
    assert "installing the agent only, beside it" in result.stderr
    cluster.settle(10)
    assert plugin_daemonsets(cluster) == [where]
    assert cluster.client.get("roles", "kubectl-gpu-agent-plugin-restart", where[0])


@pytest.mark.parametrize(("layout", "where"), [("helm", HELM_DS), ("static", STATIC_DS)])
def test_replace_plugin_deletes_exactly_the_plugin_it_names(
    run_cli: Run, sim_cluster: MakeSimCluster, layout: str, where: tuple[str, str]
) -> None:
    cluster = sim_cluster(NODES, layout)

    result = gpu(run_cli, cluster, "install", "--mode", "bundle", "--replace-plugin")

    assert result.exit_code == 0, result.stderr
    assert "--replace-plugin: deleting the " in result.stderr
    assert f"DaemonSet {where[0]}/{where[1]}" in result.stderr
    assert f"daemonset/{where[1]} -n {where[0]} deleted" in result.stdout
    cluster.settle(10)
    assert plugin_daemonsets(cluster) == [("kubectl-gpu", bundle.DEVICE_PLUGIN)]
    assert cluster.capacity("gpu-a") == 1 and cluster.capacity("gpu-b") == 1


def test_another_bundle_in_another_namespace_is_refused(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster(NODES)
    assert gpu(run_cli, cluster, "install", "-n", "gpu-tools").exit_code == 0
    result = gpu(run_cli, cluster, "install")
    assert result.exit_code == 1
    assert "kubectl-gpu is already installed in namespace gpu-tools" in result.stderr


def _release(major: str, minor: str) -> Callable[[bytes], bytes]:
    """Rewrites the server's /version answer to another release's."""

    def rewrite(body: bytes) -> bytes:
        version = json.loads(body)
        if not isinstance(version, dict) or "gitVersion" not in version:
            return body  # another path with /version in it
        version.update(major=major, minor=minor, gitVersion=f"v{major}.{minor}.0")
        return json.dumps(version).encode()

    return rewrite


def test_every_problem_is_reported_at_once_before_anything_is_written(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster(NODES)
    before = everything(cluster)
    assert cluster.plane is not None
    with in_front_of(cluster.plane, cluster.kubeconfig) as proxy:
        # the real server, but for its version: 1.29 (too old), which a pinned plane is not
        proxy.add(Fault("GET", "/version", rewrite=_release("1", "29"), times=1000))
        result = gpu(run_cli, cluster, "install", "--mode", "operator",
                     "--operator-namespace", "nvidia-gpu", "--runtime-class", "nvidia")  # fmt: skip
        assert any(s.path.startswith("/version") and s.faulted for s in proxy.seen)

    assert result.exit_code == 1
    assert "pre-flight found 3 problem(s); nothing was written" in result.stderr
    assert "Kubernetes 1.29 is too old" in result.stderr
    assert "namespace nvidia-gpu does not exist" in result.stderr
    assert "RuntimeClass nvidia does not exist" in result.stderr
    assert "Traceback" not in result.stderr
    assert everything(cluster) == before


def test_gpu_nodes_our_pods_would_not_reach_stop_the_install(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster(NODES, controllers=())
    labels = {"feature.node.kubernetes.io/pci-10de.present": None, "nvidia.com/gpu.present": None}
    cluster.client.patch("nodes", "gpu-b", {"metadata": {"labels": labels}})
    cluster.client.patch(
        "nodes", "gpu-b", {"status": {"capacity": {"nvidia.com/gpu": "1"}}}, status=True
    )
    result = gpu(run_cli, cluster, "install")
    assert result.exit_code == 1
    assert "nodes with GPUs that our DaemonSets would not run on: gpu-b" in result.stderr
    assert "kubectl label node gpu-b nvidia.com/gpu.present=true" in result.stderr


@pytest.mark.parametrize(("layout", "mode"), [(None, "bundle"), ("gpu-operator", "operator")])
def test_install_uninstall_install_leaves_no_object_or_label_behind(
    run_cli: Run, sim_cluster: MakeSimCluster, layout: str | None, mode: str
) -> None:
    cluster = sim_cluster(NODES, layout)
    before, labels = everything(cluster), node_keys(cluster)
    for _ in range(2):
        assert gpu(run_cli, cluster, "install", "--mode", mode).exit_code == 0
        cluster.settle(10)
        cluster.client.patch("nodes", "gpu-a", {"metadata": {"labels": {
            "kubectl-gpu.io/mig.state": "success"}}})  # fmt: skip
        result = gpu(run_cli, cluster, "uninstall")
        assert result.exit_code == 0, result.stderr
        cluster.settle(10)
        left = {k: v for k, v in everything(cluster).items() if k not in before}
        assert left == {}
        assert node_keys(cluster) == labels


def test_switching_modes_leaves_nothing_of_the_other_mode(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster(NODES, "helm")
    cluster.client.create({"apiVersion": "v1", "kind": "Namespace",
                          "metadata": {"name": "gpu-operator"}})  # fmt: skip
    assert gpu(run_cli, cluster, "install", "--mode", "operator").exit_code == 0
    assert cluster.client.get("roles", "kubectl-gpu-agent-plugin-restart", HELM_DS[0])

    result = gpu(run_cli, cluster, "install", "--mode", "bundle", "--replace-plugin")

    assert result.exit_code == 0, result.stderr
    assert f"role/kubectl-gpu-agent-plugin-restart -n {HELM_DS[0]} deleted" in result.stdout
    assert f"rolebinding/kubectl-gpu-agent-plugin-restart -n {HELM_DS[0]} deleted" in result.stdout
    for resource in ("roles", "rolebindings"):
        with pytest.raises(ApiError):
            cluster.client.get(resource, "kubectl-gpu-agent-plugin-restart", HELM_DS[0])
        assert cluster.client.get(resource, "kubectl-gpu-agent-plugin-restart", "kubectl-gpu")


def test_a_write_that_fails_half_way_leaves_nothing_half_installed(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster(NODES)
    # An admin who may not create admission policies (refused by the real RBAC authorizer):
    # refused after the namespace, the CRD and the RBAC objects were created.
    cluster.deny("create", "validatingadmissionpolicies", "admissionregistration.k8s.io")
    before = everything(cluster)

    result = gpu(run_cli, cluster, "install")

    assert result.exit_code == 1
    assert "install stopped there and removed the" in result.stderr
    # a deleted CRD and namespace go when the server's controllers have removed what was in
    # them (seconds under load): install has deleted them, nothing is left once they are gone
    wait_for("what install created to be gone", lambda: everything(cluster) == before)


def test_uninstall_brings_back_a_plugin_an_agent_left_paused(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster(NODES, "gpu-operator")
    assert gpu(run_cli, cluster, "install").exit_code == 0
    # An agent stopped in the middle of a MIG change: the operator's plugin is still paused.
    paused = {"labels": {"nvidia.com/gpu.deploy.device-plugin": "paused-for-mig-change"},
              "annotations": {"kubectl-gpu.io/mig.paused-plugin": "true"}}  # fmt: skip
    cluster.client.patch("nodes", "gpu-a", {"metadata": paused})

    assert gpu(run_cli, cluster, "uninstall").exit_code == 0

    meta = cluster.client.get("nodes", "gpu-a")["metadata"]
    assert meta["labels"]["nvidia.com/gpu.deploy.device-plugin"] == "true"
    assert "kubectl-gpu.io/mig.paused-plugin" not in meta.get("annotations", {})


def test_installing_again_without_flags_keeps_the_mode_it_was_installed_with(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster(NODES, "helm")
    assert gpu(run_cli, cluster, "install", "--mode", "operator").exit_code == 0

    again = gpu(run_cli, cluster, "install", "-o", "json")

    assert again.exit_code == 0, again.stderr
    assert {o["action"] for o in again.json["items"]} == {"unchanged"}
