"""A node left `pending` with the operator's operands paused (gpu-operator#2833) is found by
`mig status` and `doctor`, and `mig recover` brings its device plugin back, marks the change
failed with the reason and says what to do next. A node that is not stuck is refused."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest

from kubectl_gpu import keys
from kubectl_gpu.mig import stuck
from tests.cli.doctorpods import by_layer, gpu_pod, run_pods
from tests.conftest import ROOT, CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

Run = Callable[..., CliResult]
pytestmark = pytest.mark.timeout(120)  # clusters on the real control plane
STATUS_SCHEMA = json.loads((ROOT / "schemas" / "mig-status.v1.json").read_text())
PAUSED = keys.PAUSED_FOR_MIG_CHANGE
GFD = keys.DEPLOY_LABEL_PREFIX + "gpu-feature-discovery"


def stuck_labels(state_label: str, since: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    """What an aborted MIG manager leaves; since-when as the agent recorded it then."""
    return {
        "metadata": {
            "labels": {
                keys.MIG_CONFIG_LABEL: "all-1g.10gb",
                state_label: "pending",
                keys.DEPLOY_DEVICE_PLUGIN_LABEL: PAUSED,
                GFD: PAUSED,
            },
            "annotations": {keys.MIG_PENDING_SINCE_ANNOTATION: since},
        }
    }


@pytest.fixture
def stuck_node(sim_cluster: MakeSimCluster) -> SimCluster:
    cluster = sim_cluster([NodeSpec("gpu-a", "A100-SXM4-80GB", 1, gpu_taint=True)], "gpu-operator")
    cluster.client.patch("nodes", "gpu-a", stuck_labels(keys.MIG_CONFIG_STATE_LABEL))
    cluster.settle()
    assert cluster.plugin_pod("gpu-a") is None and cluster.allocatable("gpu-a") == 0
    return cluster


def mig_manager_pod(node: str) -> dict[str, Any]:
    """The GPU Operator's MIG manager pod on `node` (the simulated operator runs none)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"nvidia-mig-manager-{node}",
            "namespace": "gpu-operator",
            "labels": {"app": "nvidia-mig-manager"},
        },
        "spec": {
            "nodeName": node,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "containers": [{"name": "nvidia-mig-manager", "image": "k8s-mig-manager"}],
        },
    }


def test_a_pending_change_nobody_is_making_is_stuck_at_once(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    # pending since just now, but no MIG manager pod runs on the node to make the change
    cluster = sim_cluster([NodeSpec("gpu-a", "A100-SXM4-80GB", 1, gpu_taint=True)], "gpu-operator")
    now = stuck.timestamp(dt.datetime.now(dt.timezone.utc))
    cluster.client.patch("nodes", "gpu-a", stuck_labels(keys.MIG_CONFIG_STATE_LABEL, since=now))
    cluster.settle()
    [node] = run(run_cli, cluster, "mig", "status", "-o", "json").json["nodes"]
    assert node["stuck"][0] == (
        "nvidia.com/mig.config.state=pending, but no pod of the GPU Operator's MIG manager runs "
        "on the node to make the change"
    )


def run(run_cli: Run, cluster: SimCluster, *args: str) -> CliResult:
    return run_cli("--kubeconfig", str(cluster.kubeconfig), *args)


def test_mig_status_names_the_stuck_node_and_the_command(
    run_cli: Run, stuck_node: SimCluster
) -> None:
    result = run(run_cli, stuck_node, "mig", "status", "-o", "json")
    assert result.exit_code == 0
    jsonschema.validate(result.json, STATUS_SCHEMA)
    [node] = result.json["nodes"]
    assert node["stuck"][0].startswith("nvidia.com/mig.config.state=pending for ")
    assert node["stuck"][1] == (
        f"{keys.DEPLOY_DEVICE_PLUGIN_LABEL}, {GFD} left paused-for-mig-change with no MIG "
        "change running: the node advertises no GPUs"
    )
    assert "recover it: kubectl gpu mig recover gpu-a" in result.stderr


def test_doctor_reports_the_stuck_node_with_recover_as_the_fix(
    run_cli: Run, stuck_node: SimCluster
) -> None:
    whole = run(run_cli, stuck_node, "doctor", "-o", "json")
    assert whole.exit_code == 1
    [error] = [d for d in whole.json["diagnoses"] if d["severity"] == "error"]
    assert error["message"].startswith("the MIG change on node gpu-a is stuck: ")
    assert error["fix"] == "kubectl gpu mig recover gpu-a"
    assert by_layer(whole.json, "driver") == [error]  # no "unhealthy GPU" for allocatable 0

    run_pods(stuck_node, gpu_pod("train", tolerate=True))
    pod = run(run_cli, stuck_node, "doctor", "train", "-o", "json")
    [plugin] = by_layer(pod.json, "kubelet")
    assert plugin["message"].startswith(
        "the device plugin on node gpu-a is missing (a stuck MIG change paused it: "
    )
    assert plugin["fix"] == "kubectl gpu mig recover gpu-a"


def test_a_pod_bound_before_the_change_stuck_is_told_the_same(
    run_cli: Run, stuck_node: SimCluster
) -> None:
    pod = gpu_pod("bound", tolerate=True)
    pod["spec"]["nodeName"] = "gpu-a"
    run_pods(stuck_node, pod)
    result = run(run_cli, stuck_node, "doctor", "bound", "-o", "json")
    assert result.exit_code == 1
    [why] = [d for d in by_layer(result.json, "kubelet") if "stuck MIG change" in d["message"]]
    assert why["message"].startswith(
        "a stuck MIG change took the device plugin off node gpu-a: nvidia.com/mig.config.state="
    )
    assert why["fix"] == "kubectl gpu mig recover gpu-a"


def test_recover_brings_the_plugin_back_and_marks_the_change_failed(
    run_cli: Run, stuck_node: SimCluster
) -> None:
    result = run(run_cli, stuck_node, "mig", "recover", "gpu-a", "-o", "json")
    assert result.exit_code == 0, result.stderr
    [done] = result.json["nodes"]
    assert done["restored"] == {keys.DEPLOY_DEVICE_PLUGIN_LABEL: "true", GFD: "true"}
    assert done["state"] == {keys.MIG_CONFIG_STATE_LABEL: "failed"}
    assert "kubectl gpu mig apply -f FILE -c all-1g.10gb --node gpu-a --force" in done["next"]
    assert "next: read why the MIG manager stopped" in result.stderr

    stuck_node.settle()
    node = stuck_node.client.get("nodes", "gpu-a")["metadata"]
    assert node["labels"][keys.MIG_CONFIG_STATE_LABEL] == "failed"
    assert node["annotations"][keys.MIG_REASON_ANNOTATION].startswith(
        "recovered by kubectl gpu mig recover: nvidia.com/mig.config.state=pending for "
    )
    assert keys.MIG_PENDING_SINCE_ANNOTATION not in node["annotations"]
    assert stuck_node.plugin_pod("gpu-a") is not None and stuck_node.allocatable("gpu-a") == 1

    status = run(run_cli, stuck_node, "mig", "status", "-o", "json").json
    assert status["nodes"][0]["stuck"] == []
    assert status["nodes"][0]["reason"].startswith("recovered by kubectl gpu mig recover")


def test_a_node_that_is_not_stuck_is_refused_and_left_alone(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "A100-SXM4-80GB", 1, gpu_taint=True)], "gpu-operator")
    cluster.client.create(mig_manager_pod("gpu-a"), keep_status=False)
    # a change that began just now, with the MIG manager running, is under way, not stuck
    now = stuck.timestamp(dt.datetime.now(dt.timezone.utc))
    cluster.client.patch("nodes", "gpu-a", stuck_labels(keys.MIG_CONFIG_STATE_LABEL, since=now))
    cluster.settle()
    before = cluster.client.get("nodes", "gpu-a")["metadata"]["resourceVersion"]
    result = run(run_cli, cluster, "mig", "recover", "gpu-a")
    assert result.exit_code == 1
    assert "error: no stuck MIG change on gpu-a: nothing to recover" in result.stderr
    assert cluster.client.get("nodes", "gpu-a")["metadata"]["resourceVersion"] == before


def test_our_agents_paused_plugin_goes_back_to_the_value_it_kept(
    run_cli: Run, sim_cluster: MakeSimCluster
) -> None:
    # Our agent (the operator's MIG manager off) paused the plugin, kept "true", and died.
    cluster = sim_cluster([NodeSpec("gpu-a", "A100-SXM4-80GB", 1, gpu_taint=True)], "gpu-operator")
    cluster.client.patch(
        "clusterpolicies", "cluster-policy", {"spec": {"migManager": {"enabled": False}}}
    )
    body = stuck_labels(keys.MIG_STATE_LABEL)
    del body["metadata"]["labels"][GFD], body["metadata"]["labels"][keys.MIG_CONFIG_LABEL]
    body["metadata"]["labels"][keys.MIG_DESIRED_LABEL] = "balanced"
    body["metadata"]["annotations"][keys.MIG_PAUSED_PLUGIN_ANNOTATION] = "true"
    body["metadata"]["annotations"][keys.MIG_PHASE_ANNOTATION] = "configuring"
    cluster.client.patch("nodes", "gpu-a", body)
    cluster.settle()

    result = run(run_cli, cluster, "mig", "recover", "gpu-a", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert result.json["nodes"][0]["actuator"] == "kubectl-gpu"
    node = cluster.client.get("nodes", "gpu-a")["metadata"]
    assert node["labels"][keys.MIG_STATE_LABEL] == "failed"
    assert node["labels"][keys.DEPLOY_DEVICE_PLUGIN_LABEL] == "true"
    gone = {keys.MIG_PHASE_ANNOTATION, keys.MIG_PAUSED_PLUGIN_ANNOTATION}
    assert gone.isdisjoint(node["annotations"])
    assert "kubectl gpu mig apply -f FILE -c balanced --node gpu-a --force" in result.stderr
