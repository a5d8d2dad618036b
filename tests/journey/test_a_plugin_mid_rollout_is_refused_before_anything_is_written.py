"""A device-plugin DaemonSet in the middle of its own rollout (someone changed its template;
a surge whose `minReadySeconds` holds the rollout at its first node): a plugin pod `share`
deleted now would come back with whichever template the rollout has reached, on the rollout's
schedule. It used to be a warning; now `share` and its dry runs refuse before anything is
written, naming the DaemonSet and the command to wait with. Through the real kubectl; the
real DaemonSet controller does the rollout."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from kubectl_gpu import keys
from tests.journey.fixtures import Kubectl
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(180)]
PLAIN = "version: v1\nflags:\n  migStrategy: none\n"
NAMESPACE, DAEMONSET = "nvidia-device-plugin", "nvdp-nvidia-device-plugin"
CONFIGMAP = ("configmap", "-n", NAMESPACE, "nvdp-nvidia-device-plugin-configs")


def rolling(k: Kubectl) -> bool:
    found = json.loads(k("get", "daemonset", "-n", NAMESPACE, DAEMONSET, "-o", "json").stdout)
    status = found.get("status") or {}
    return status.get("updatedNumberScheduled", 0) < status.get("desiredNumberScheduled", 0)


def test_share_refuses_while_the_plugin_rolls_out(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl]
) -> None:
    nodes = [NodeSpec("gpu-a", "L4", 2), NodeSpec("gpu-b", "L4", 2)]
    cluster = sim_cluster(nodes, "helm", {"any": PLAIN}, "any")
    k = kubectl(cluster)
    # surge one new pod at a time, which counts as available only after an hour: the
    # controller holds the rollout at its first node
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    patch = {"spec": {"minReadySeconds": 3600, "updateStrategy": strategy, "template": {
        "metadata": {"annotations": {"example.com/restarted": "now"}}}}}  # fmt: skip
    assert k("patch", "daemonset", "-n", NAMESPACE, DAEMONSET, "--type", "merge", "-p",
             json.dumps(patch)).returncode == 0  # fmt: skip
    deadline = time.monotonic() + 30
    while not rolling(k) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert rolling(k), k("get", "daemonset", "-n", NAMESPACE, DAEMONSET, "-o", "yaml").stdout
    before = json.loads(k("get", *CONFIGMAP, "-o", "json").stdout)["data"]

    share = ("gpu", "share", "--replicas", "2", "--node", "gpu-a")
    runs = [k(*share, "--dry-run"), k(*share, "--dry-run=server"), k(*share)]

    for run in runs:
        assert run.returncode == 1, (run.args, run.stderr)
        assert f"the device plugin DaemonSet {NAMESPACE}/{DAEMONSET} is mid-rollout" in run.stderr
        assert f"kubectl rollout status -n {NAMESPACE} daemonset/{DAEMONSET}" in run.stderr
        assert "nothing was written" in run.stderr and "Traceback" not in run.stderr
    assert json.loads(k("get", *CONFIGMAP, "-o", "json").stdout)["data"] == before
    labels = cluster.client.get("nodes", "gpu-a")["metadata"]["labels"]
    assert keys.DEVICE_PLUGIN_CONFIG_LABEL not in labels
