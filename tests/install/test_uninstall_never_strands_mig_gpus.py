"""`uninstall` after `mig apply`: the bundle had replaced the Helm chart's plugin (MIG strategy
`none`) and its own (`mixed`) advertised the GPU's MIG devices. Uninstalling would give the
node back to the Helm plugin, which advertises a MIG-enabled GPU as a whole `nvidia.com/gpu`
CUDA cannot use, with no agent left to turn MIG off: it is refused before anything is deleted,
naming the node and the strategy (the dry run says the same), and goes through with --force;
`doctor` then warns about the stale MIG devices instead of calling the GPU sick. Through the
real kubectl on the real control plane."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from kubectl_gpu import bundle, keys
from tests.journey.fixtures import Kubectl
from tests.kit.cluster import SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(180)]
MIG = "nvidia.com/mig-3g.40gb"


def bundle_over_mig(sim_cluster: MakeSimCluster, k: Callable[[SimCluster], Kubectl]) -> SimCluster:
    cluster = sim_cluster(["gpu-1=A100-SXM4-80GB:1"], "helm")
    run = k(cluster)
    installed = run("gpu", "install", "--mode", "bundle", "--replace-plugin")
    assert installed.returncode == 0, installed.stderr
    cluster.settle(10)
    cluster.set_mig("gpu-1", 0, ["3g.40gb", "3g.40gb"])  # what the agent's `mig apply` left
    # the agent restarts the bundle's plugin after a change, so that it reads the new devices
    selector = f"{keys.APP_NAME_LABEL}={bundle.DEVICE_PLUGIN}"
    restarted = run("delete", "pod", "-n", keys.NAMESPACE, "-l", selector)
    assert restarted.returncode == 0, restarted.stderr
    deadline = time.monotonic() + 30
    while cluster.allocatable("gpu-1", MIG) != 2 and time.monotonic() < deadline:
        cluster.settle()
    assert cluster.allocatable("gpu-1", MIG) == 2
    return cluster


def test_uninstall_refuses_to_leave_mig_gpus_to_a_plugin_with_strategy_none(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl]
) -> None:
    cluster = bundle_over_mig(sim_cluster, kubectl)
    k = kubectl(cluster)

    runs = [k("gpu", "uninstall", "--dry-run"), k("gpu", "uninstall", "--dry-run=server")]
    real = k("gpu", "uninstall")

    for run in (*runs, real):
        assert run.returncode == 1, (run.args, run.stderr)
        assert "node(s) gpu-1 keep MIG-enabled GPUs" in run.stderr
        assert "NVIDIA Helm chart (DaemonSet nvidia-device-plugin/nvdp-nvidia-device-plugin)" in (
            run.stderr
        )
        assert "migStrategy none" in run.stderr
        assert "kubectl gpu mig apply -f FILE -c all-disabled --node gpu-1" in run.stderr
        assert "--force" in run.stderr
    # nothing was deleted: the bundle still runs and serves the MIG devices
    assert cluster.client.get("daemonsets", bundle.DEVICE_PLUGIN, keys.NAMESPACE)
    assert cluster.allocatable("gpu-1", MIG) == 2

    forced = k("gpu", "uninstall", "--force")

    assert forced.returncode == 0, forced.stderr
    assert "--force: uninstalling anyway" in forced.stderr
    cluster.settle(10)
    assert cluster.allocatable("gpu-1") == 1  # the Helm plugin's whole GPU: what CUDA rejects

    doctor = k("gpu", "doctor", "-o", "json")
    found = json.loads(doctor.stdout)["diagnoses"]
    assert not [d for d in found if "unhealthy" in d["message"]], found
    [stale] = [d for d in found if "still lists nvidia.com/mig-3g.40gb" in d["message"]]
    assert stale["severity"] == "warning" and "all-disabled" in stale["fix"]
