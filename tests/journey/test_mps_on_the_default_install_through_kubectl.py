"""The README's own `kubectl gpu share --replicas 2 --mps --node gpu-b` on a cluster where
`kubectl gpu install` put the bundle: its default key says `migStrategy: mixed` (for MIG
nodes), which the device plugin refuses beside MPS, so the command used to be refused on every
bundle install. Now gpu-b's own key says `migStrategy: none`, the plugin restarts and gpu-b
advertises 2 replicas of its GPU, while gpu-a keeps the default key. Through the real kubectl."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
import yaml

from kubectl_gpu import bundle, keys
from tests.journey.fixtures import Kubectl
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(180)]


def test_the_readmes_mps_example_works_on_the_bundle(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl]
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "H100-SXM5-80GB", 1), NodeSpec("gpu-b", "L4", 1)])
    k = kubectl(cluster)
    installed = k("gpu", "install")
    assert installed.returncode == 0, installed.stderr
    cluster.settle(10)
    assert cluster.capacity("gpu-b") == 1
    mps = ("gpu", "share", "--replicas", "2", "--mps", "--node", "gpu-b")

    planned = k(*mps, "--dry-run")
    done = k(*mps, "--wait", "--timeout", "60s")

    assert planned.returncode == done.returncode == 0, (planned.stderr, done.stderr)
    assert "migStrategy none (was mixed)" in done.stderr
    assert cluster.allocatable("gpu-b") == 2 and cluster.allocatable("gpu-a") == 1
    found = k(
        "get", "configmap", "-n", keys.NAMESPACE, bundle.DEVICE_PLUGIN_CONFIGMAP, "-o", "json"
    )
    data = json.loads(found.stdout)["data"]
    own = yaml.safe_load(data["kubectl-gpu-mps-2"])
    assert own["flags"]["migStrategy"] == "none"
    assert yaml.safe_load(data["default"])["flags"]["migStrategy"] == "mixed"  # kept for MIG
