"""The headline journey, as a user runs it: the real `kubectl` dispatching to `kubectl gpu`, a
real control plane (kube-apiserver with RBAC and admission, controller-manager, scheduler, KWOK)
whose simulated GPU nodes run the real `kubectl-gpu-agent` as separate processes once it is
installed, each with a token the server issued for its pod. Each step asserts what the user sees
(the same story `make demo` tells)."""

from __future__ import annotations

import functools
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubectl_gpu import keys
from tests.conftest import ROOT
from tests.conftest import eventually as retried
from tests.journey.fixtures import Kubectl
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(180)]
NVIDIA_DEFAULT_MIG = (
    ROOT / "tests" / "data" / "mig" / "mig-parted__deployments__systemd__config-default.yaml"
)
CUDA = "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"


eventually = functools.partial(retried, timeout=60.0, pause=0.2)


def pod(name: str, resource: str, node: str | None = None) -> str:
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": CUDA, "resources": {"limits": {resource: "1"}}}]
    }
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}}
    return json.dumps({**body, "spec": spec})


def map_items(k: Kubectl, *args: str) -> list[dict[str, Any]]:
    result = k("gpu", "map", *args, "-o", "json")
    assert result.returncode == 0, result.stderr
    items: list[dict[str, Any]] = json.loads(result.stdout)["items"]
    return items


@pytest.fixture
def cluster(sim_cluster: MakeSimCluster) -> SimCluster:
    return sim_cluster(
        [NodeSpec("gpu-a", "H100-SXM5-80GB", 2), NodeSpec("gpu-b", "A100-SXM4-80GB", 2),
         NodeSpec("cpu-1")],
        agents=True,
    )  # fmt: skip


def test_install_share_map_mig_doctor_uninstall(
    cluster: SimCluster, kubectl: Callable[[SimCluster], Kubectl]
) -> None:
    k = kubectl(cluster)
    # install: every GPU node gets the device plugin and an agent process that reports
    installed = k("gpu", "install")
    assert installed.returncode == 0, installed.stderr
    assert eventually(lambda: k("gpu", "status").returncode == 0), k("gpu", "status").stderr
    assert cluster.agents is not None
    assert cluster.agents.pid("gpu-a") and cluster.agents.pid("gpu-b")
    assert cluster.agents.pid("gpu-a") != os.getpid()
    # each agent speaks as its ServiceAccount, with a token bound to its pod
    token = cluster.agents.sides["gpu-a"].kubeconfig
    who = k("auth", "whoami", "-o", "json", "--kubeconfig", str(token))
    assert who.returncode == 0, who.stderr
    user = json.loads(who.stdout)["status"]["userInfo"]
    assert user["username"].startswith("system:serviceaccount:kubectl-gpu:")
    assert user["extra"]["authentication.kubernetes.io/node-name"] == ["gpu-a"]

    # share: 2 GPUs x 4 replicas on each node, proven by the node's allocatable
    shared = k("gpu", "share", "--replicas", "4", "--wait", "--timeout", "60s", "-o", "json")
    assert shared.returncode == 0, shared.stderr
    assert [cluster.allocatable(n) for n in ("gpu-a", "gpu-b")] == [8, 8]

    # three pods on gpu-a are placed on replicas; map shows each on its physical GPU
    for i in range(3):
        placed = k("apply", "-f", "-", stdin=pod(f"infer-{i}", "nvidia.com/gpu", "gpu-a"))
        assert placed.returncode == 0, placed.stderr

    def held_rows() -> list[dict[str, Any]] | None:
        rows = [r for r in map_items(k, "-A") if r["pod"]]
        return rows if len(rows) == 3 else None

    held = eventually(held_rows)
    assert held, "the agents never reported the three pods"
    uuids = {g.uuid: g.index for g in cluster.node_gpus("gpu-a")}
    for row in held:
        assert row["node"] == "gpu-a" and row["namespace"] == "default"
        assert row["device_id"] == f"{row['gpu_uuid']}::{row['replica']}"
        assert uuids[row["gpu_uuid"]] == row["gpu_index"]
    table = k("gpu", "map", "-A")
    assert "default/infer-0" in table.stdout and "::" in table.stdout

    # MIG on gpu-b: checked offline, applied by gpu-b's agent process through NVML
    applied = k("gpu", "mig", "apply", "-f", str(NVIDIA_DEFAULT_MIG), "-c", "all-balanced",
                "--node", "gpu-b", "--wait", "--timeout", "90s", "-o", "json")  # fmt: skip
    assert applied.returncode == 0, applied.stderr
    assert json.loads(applied.stdout)["nodes"][0]["result"] == "success"
    assert cluster.allocatable("gpu-b", "nvidia.com/mig-1g.10gb") == 4
    assert cluster.allocatable("gpu-b", "nvidia.com/mig-3g.40gb") == 2
    assert cluster.allocatable("gpu-b") == 0  # every GPU of gpu-b is partitioned now
    gpu_b = cluster.nodes["gpu-b"].gpu_views()  # the node's GPUs, as its NVML shows them now
    assert all(g.mig_enabled and len(g.mig_devices) == 4 for g in gpu_b)

    # a MIG pod: the map shows its MIG device under the parent GPU, profile and placement
    assert k("apply", "-f", "-", stdin=pod("notebook", "nvidia.com/mig-1g.10gb")).returncode == 0

    def notebook() -> dict[str, Any] | None:
        return next((r for r in map_items(k, "gpu-b") if r["pod"] == "notebook"), None)

    row = eventually(notebook)
    assert row, "the notebook never showed in the map"
    assert row["mig_uuid"].startswith("MIG-") and row["device_id"] == row["mig_uuid"]
    assert row["gpu_uuid"] in {g.uuid for g in gpu_b}
    assert row["mig_profile"] == "1g.10gb" and row["mig_placement"]["size"] == 1

    # doctor names the layer where a broken pod stops
    too_many = pod("trainer", "nvidia.com/mig-3g.40gb").replace('"1"', '"3"')
    assert k("apply", "-f", "-", stdin=too_many).returncode == 0
    cluster.settle()
    doctor = k("gpu", "doctor", "trainer", "-o", "json")
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    layers = {
        d["layer"] for d in json.loads(doctor.stdout)["diagnoses"] if d["severity"] == "error"
    }
    assert layers == {"scheduler"}

    # uninstall: no agent process, object or label of ours left
    removed = k("gpu", "uninstall")
    assert removed.returncode == 0, removed.stderr
    cluster.settle(10)
    assert eventually(lambda: not cluster.agents.pid("gpu-a") and not cluster.agents.pid("gpu-b"))
    for node in ("gpu-a", "gpu-b"):
        meta = cluster.client.get("nodes", node)["metadata"]
        assert not [k_ for k_ in meta.get("labels", {}) if k_.startswith(keys.PREFIX)]


def test_a_killed_agent_is_restarted_by_the_kubelet_and_finishes_the_change(
    cluster: SimCluster, kubectl: Callable[[SimCluster], Kubectl]
) -> None:
    k = kubectl(cluster)
    assert k("gpu", "install").returncode == 0
    assert eventually(lambda: k("gpu", "status").returncode == 0)
    assert cluster.agents is not None
    first = cluster.agents.pid("gpu-b")
    assert first is not None

    asked = k("gpu", "mig", "apply", "-f", str(NVIDIA_DEFAULT_MIG), "-c", "all-1g.10gb",
              "--node", "gpu-b")  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    os.kill(first, signal.SIGKILL)  # as the OOM killer would: before, during or after its work

    def state() -> str | None:
        labels = cluster.client.get("nodes", "gpu-b")["metadata"].get("labels") or {}
        found = labels.get(keys.MIG_STATE_LABEL)
        return found if found in ("success", "failed") else None

    assert eventually(state, timeout=60) == "success"
    assert eventually(lambda: cluster.allocatable("gpu-b", "nvidia.com/mig-1g.10gb") == 14)
    second = cluster.agents.pid("gpu-b")
    assert second and second != first
    agent_pod = k("get", "pods", "-n", "kubectl-gpu", "--field-selector", "spec.nodeName=gpu-b",
                  "-l", "app.kubernetes.io/name=kubectl-gpu-agent", "-o", "json")  # fmt: skip
    [item] = json.loads(agent_pod.stdout)["items"]
    assert item["status"]["containerStatuses"][0]["restartCount"] >= 1


HALF_MIG = """version: v1
mig-configs:
  first-gpu-balanced:
  - devices: [0]
    mig-enabled: true
    mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
  - devices: [1]
    mig-enabled: false
"""


def test_mig_on_a_time_sliced_node_expects_the_replicas_of_what_stays_whole(
    cluster: SimCluster, kubectl: Callable[[SimCluster], Kubectl], tmp_path: Path
) -> None:
    k = kubectl(cluster)
    assert k("gpu", "install").returncode == 0
    assert eventually(lambda: k("gpu", "status").returncode == 0)
    assert k("gpu", "share", "--replicas", "4", "--wait", "--timeout", "60s").returncode == 0
    config = tmp_path / "mig.yaml"
    config.write_text(HALF_MIG)

    applied = k("gpu", "mig", "apply", "-f", str(config), "-c", "first-gpu-balanced",
                "--node", "gpu-a", "--wait", "--timeout", "60s", "-o", "json")  # fmt: skip

    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert json.loads(applied.stdout)["nodes"][0]["result"] == "success"
    # GPU 1 stays whole and time-sliced 4 ways; GPU 0's MIG devices are not time-sliced
    assert cluster.allocatable("gpu-a") == 4
    assert cluster.allocatable("gpu-a", "nvidia.com/mig-1g.10gb") == 2
