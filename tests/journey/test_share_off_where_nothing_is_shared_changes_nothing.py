"""`share off --node gpu-a` where gpu-a shares nothing: nothing is written (no `kubectl-gpu-off`
key, no node label) and the plugin is not restarted; it used to write both and restart the
plugin for a config that changed nothing. Sharing that is on is still turned off. Through the
real kubectl on the real control plane."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from kubectl_gpu import keys
from tests.journey.fixtures import Kubectl
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(180)]
PLAIN = "version: v1\nflags:\n  migStrategy: none\n"
CONFIGMAP = ("configmap", "-n", "nvidia-device-plugin", "nvdp-nvidia-device-plugin-configs")


def test_nothing_shared_nothing_written_nothing_restarted(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl]
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 2)], "helm", {"any": PLAIN}, "any")
    k = kubectl(cluster)
    before = json.loads(k("get", *CONFIGMAP, "-o", "json").stdout)
    pod = (cluster.plugin_pod("gpu-a") or {})["metadata"]["uid"]

    done = k("gpu", "share", "off", "--node", "gpu-a", "--wait", "--timeout", "30s")

    assert done.returncode == 0, done.stderr
    assert "node gpu-a shares nothing now; nothing to turn off there" in done.stderr
    after = json.loads(k("get", *CONFIGMAP, "-o", "json").stdout)
    assert after["data"] == before["data"]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    labels = cluster.client.get("nodes", "gpu-a")["metadata"]["labels"]
    assert keys.DEVICE_PLUGIN_CONFIG_LABEL not in labels
    assert (cluster.plugin_pod("gpu-a") or {})["metadata"]["uid"] == pod
    assert cluster.allocatable("gpu-a") == 2
