"""The agent as the kubelet runs it: SIGTERM stops it at a safe point and the next agent
resumes; NVML that has lost the driver ("Unknown Error" after `systemctl daemon-reload`)
fails the health check so that the container is replaced; a GPU reset happens with NVML shut
down and the device plugin off the node, in every layout."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubectl_gpu import agent, bundle, keys
from kubectl_gpu import cluster as api_client
from kubectl_gpu.agent import lifecycle
from tests.agent.fixtures import Agent, ask, labels, node_nvml, notes, store_config
from tests.conftest import CliResult
from tests.gpumap import reportbuilders
from tests.kit.cluster import SimCluster
from tests.kit.cluster.cluster import ALL_CONTROLLERS
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import layouts
from tests.kit.node import libnvml
from tests.kit.node.kubelet import FakeKubelet

BALANCED = {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}


def run_once(cluster: SimCluster, root: Path, heartbeat: Path) -> int:
    argv = ["--once", "--node-name", "gpu-1", "--kubelet-root", str(root), "--timeout", "5"]
    with node_nvml(cluster, "gpu-1"):
        status = agent.main([*argv, "--kubeconfig", str(cluster.kubeconfig),
                             "--heartbeat", str(heartbeat)])  # fmt: skip
    cluster.settle()
    return status


def health(heartbeat: Path) -> int:
    return agent.main(["--check-health", "--heartbeat", str(heartbeat), "--max-age", "120"])


def mixed_helm(
    sim_cluster: MakeSimCluster, *, reports: bool = True, plugin: bool = True
) -> SimCluster:
    """`plugin=False`: the plugin pod runs no program (NVIDIA's plugin would crash-loop on a
    node whose NVML lost the driver, and the cluster would never settle)."""
    controllers = (
        ALL_CONTROLLERS if plugin else tuple(c for c in ALL_CONTROLLERS if c != "device-plugin")
    )
    cluster = sim_cluster(
        ["gpu-1=H100-SXM5-80GB:1"],
        layouts.helm(env={"MIG_STRATEGY": "mixed"}),
        controllers=controllers,
    )
    if reports:
        reportbuilders.install(api_client.connect(str(cluster.kubeconfig)))
    return cluster


# ---- SIGTERM ------------------------------------------------------------------------------------


def test_sigterm_during_a_mig_change_stops_after_the_nvml_call_and_the_next_agent_resumes(
    sim_cluster: MakeSimCluster, fake_kubelet: FakeKubelet, tmp_path: Path
) -> None:
    cluster = mixed_helm(sim_cluster)
    store_config(cluster, "balanced", BALANCED)
    ask(cluster, "gpu-1", "balanced")
    lib = cluster.nvml("gpu-1")
    lib.on_return("nvmlDeviceCreateGpuInstanceWithPlacement",
                  lambda: signal.raise_signal(signal.SIGTERM))  # fmt: skip

    status = run_once(cluster, fake_kubelet.root, tmp_path / "beat")

    assert status == 0  # a clean stop, not a crash
    assert lib.calls.count("nvmlDeviceCreateGpuInstanceWithPlacement") == 1
    assert len(lib.gpu(0).mig.gpu_instances) == 1  # the call in progress completed
    assert not lib.initialized  # NVML shut down on the way out
    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "pending"
    reason = notes(cluster, "gpu-1")[keys.MIG_REASON_ANNOTATION]
    assert "stopped (SIGTERM) during configuring; the next agent resumes it" in reason
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler was put back

    del lib.after_return["nvmlDeviceCreateGpuInstanceWithPlacement"]
    assert run_once(cluster, fake_kubelet.root, tmp_path / "beat") == 0
    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "success"
    assert cluster.allocatable("gpu-1", "nvidia.com/mig-1g.10gb") == 2
    assert keys.MIG_REASON_ANNOTATION not in notes(cluster, "gpu-1")


def test_sigterm_during_a_gpu_reset_waits_for_the_reset_to_finish() -> None:
    shutdown = lifecycle.Shutdown()
    done = []
    with shutdown.installed(), pytest.raises(lifecycle.Stopped):
        with shutdown.critical():
            signal.raise_signal(signal.SIGTERM)
            done.append("reset finished")
        done.append("never: stopped right after the reset")
    assert done == ["reset finished"]


def test_sigterm_at_rest_ends_the_loop_cleanly(
    sim_cluster: MakeSimCluster, fake_kubelet: FakeKubelet, tmp_path: Path
) -> None:
    cluster = mixed_helm(sim_cluster)
    # The first NVML call of the second pass brings the signal, as if during the interval.
    lib = cluster.nvml("gpu-1")
    lib.on_return("nvmlShutdown", lambda: signal.raise_signal(signal.SIGTERM))
    argv = ["--node-name", "gpu-1", "--kubelet-root", str(fake_kubelet.root), "--interval", "0"]
    with node_nvml(cluster, "gpu-1"):
        status = agent.main([*argv, "--kubeconfig", str(cluster.kubeconfig),
                             "--heartbeat", str(tmp_path / "beat")])  # fmt: skip
    assert status == 0
    assert keys.MIG_REASON_ANNOTATION not in notes(cluster, "gpu-1")  # nothing was under way


# ---- NVML loses the driver ----------------------------------------------------------------------


@pytest.mark.parametrize("code", [libnvml.codes.UNKNOWN, libnvml.codes.DRIVER_NOT_LOADED])
def test_nvml_that_lost_the_driver_makes_the_agent_unhealthy(
    sim_cluster: MakeSimCluster, fake_kubelet: FakeKubelet, tmp_path: Path, code: int
) -> None:
    cluster = mixed_helm(sim_cluster, plugin=False)
    beat = tmp_path / "run" / "heartbeat"
    assert run_once(cluster, fake_kubelet.root, beat) == 0
    assert health(beat) == 0

    cluster.nvml("gpu-1").lose_driver(code)  # e.g. `systemctl daemon-reload` on the host

    assert run_once(cluster, fake_kubelet.root, beat) == 1
    assert health(beat) == 1  # liveness fails: the kubelet restarts the container


def test_nvml_failing_in_the_middle_of_a_change_leaves_it_for_the_next_agent(
    sim_cluster: MakeSimCluster, fake_kubelet: FakeKubelet, tmp_path: Path
) -> None:
    cluster = mixed_helm(sim_cluster)
    store_config(cluster, "balanced", BALANCED)
    ask(cluster, "gpu-1", "balanced")
    lib = cluster.nvml("gpu-1")
    lib.on_return("nvmlDeviceCreateGpuInstanceWithPlacement", lib.lose_driver)
    beat = tmp_path / "beat"

    assert run_once(cluster, fake_kubelet.root, beat) == 1

    assert health(beat) == 1
    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "pending"  # not failed: resumed
    lib.lost = None  # the container is replaced; NVML works again
    del lib.after_return["nvmlDeviceCreateGpuInstanceWithPlacement"]
    assert run_once(cluster, fake_kubelet.root, beat) == 0
    assert labels(cluster, "gpu-1")[keys.MIG_STATE_LABEL] == "success"
    assert health(beat) == 0


def test_a_pass_whose_report_fails_is_still_healthy(
    sim_cluster: MakeSimCluster, fake_kubelet: FakeKubelet, tmp_path: Path
) -> None:
    cluster = mixed_helm(sim_cluster, reports=False)  # the report write gets a 404
    beat = tmp_path / "beat"
    assert run_once(cluster, fake_kubelet.root, beat) == 1
    assert health(beat) == 0


def test_the_agent_says_its_version() -> None:
    with pytest.raises(SystemExit) as done:
        agent.main(["--version"])
    assert done.value.code == 0


# ---- GPU reset: NVML shut down, plugin off the node ---------------------------------------------


def install_bundle(run_cli: Callable[..., CliResult], cluster: SimCluster) -> None:
    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "install")
    assert result.exit_code == 0, result.stderr
    cluster.settle(10)


def plugin_pods_on(cluster: SimCluster, node: str) -> list[dict[str, Any]]:
    pods = []
    for pod in cluster.client.list("pods"):
        names = {c["name"] for c in pod["spec"]["containers"]}
        on_node = pod["spec"].get("nodeName") == node
        if on_node and names & {"nvidia-device-plugin-ctr", "nvidia-device-plugin"}:
            pods.append(pod)
    return pods


@pytest.mark.parametrize("layout", ["helm", "static", "gpu-operator", "bundle"])
def test_a_gpu_reset_runs_with_nvml_shut_down_and_the_plugin_off_the_node(
    sim_cluster: MakeSimCluster, agent: Agent, run_cli: Callable[..., CliResult], layout: str
) -> None:
    node = "gpu-1=A100-SXM4-40GB:1"
    if layout == "bundle":
        cluster = sim_cluster([node])
        install_bundle(run_cli, cluster)
    elif layout == "gpu-operator":
        cluster = sim_cluster([node], layouts.gpu_operator(mig_strategy="mixed"))
        cluster.client.patch("clusterpolicies", "cluster-policy",
                            {"spec": {"migManager": {"enabled": False}}})  # fmt: skip
        cluster.settle()
    else:
        cluster = sim_cluster([node], layouts.LAYOUTS[layout](env={"MIG_STRATEGY": "mixed"})
                              if layout == "helm" else layout)  # fmt: skip
    before: set[str] = set()
    for _ in range(150):  # the DaemonSet controller may not have placed it yet on a busy machine
        before = {p["metadata"]["uid"] for p in plugin_pods_on(cluster, "gpu-1")}
        if before:
            break
        time.sleep(0.2)
    assert before, "a device plugin pod runs on the node before the change"
    store_config(cluster, "one", {"3g.20gb": 2})
    ask(cluster, "gpu-1", "one")
    lib = cluster.nvml("gpu-1")
    seen: list[tuple[bool, set[str]]] = []

    def reset(index: int, bus: str) -> None:
        live = {p["metadata"]["uid"] for p in plugin_pods_on(cluster, "gpu-1")
                if not p["metadata"].get("deletionTimestamp")}  # fmt: skip
        seen.append((lib.initialized, live & before))
        assert lib.reset(index) == 0

    agent(cluster, "gpu-1", reset=reset)

    assert seen == [(False, set())]  # NVML closed; the plugin pod that held the GPU is gone
    assert lib.initialized is False
    if layout in ("gpu-operator", "bundle"):
        assert labels(cluster, "gpu-1").get(keys.DEPLOY_DEVICE_PLUGIN_LABEL, "true") == "true"
    assert plugin_pods_on(cluster, "gpu-1"), "the device plugin is back after the change"
    assert bundle.DEVICE_PLUGIN  # the bundle's own DaemonSet honours the pause label
