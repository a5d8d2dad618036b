"""The stand-in serves `pods/log` as kube-apiserver does: text, tails, limits and refusals."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.apiserver import FakeApiServer
from tests.fakes.apiserver.kubectl_cli import KubectlRunner
from tests.fakes.apiserver.rawclient import RawClient
from tests.fakes.cluster import NodeSpec, SimCluster
from tests.fakes.cluster.fixture import MakeSimCluster, kubectl_for
from tests.fakes.cluster.fixture import sim_cluster as sim_cluster

LINES = [f"step {i}: loss 0.{i}" for i in range(1, 9)]
LOG = "/api/v1/namespaces/default/pods/{}/log"


def pod(name: str, *containers: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": c, "image": "cuda"} for c in containers]},
    }


@pytest.fixture
def server(fake_apiserver: FakeApiServer) -> FakeApiServer:
    fake_apiserver.store.create(pod("train", "cuda"))
    fake_apiserver.store.create(pod("pair", "cuda", "sidecar"))
    fake_apiserver.logs.set("default", "train", "cuda", "\n".join(LINES) + "\n")
    fake_apiserver.logs.set("default", "train", "cuda", "CUDA error: boom\n", previous=True)
    fake_apiserver.logs.set("default", "pair", "sidecar", "sidecar up\n")
    return fake_apiserver


def test_the_tail_and_byte_limit_cut_the_text(server: FakeApiServer, raw: RawClient) -> None:
    answer = raw.get(LOG.format("train") + "?tailLines=2")
    assert answer.status == 200
    assert answer.headers["Content-Type"] == "text/plain"
    assert answer.body.decode() == "step 7: loss 0.7\nstep 8: loss 0.8\n"
    cut = raw.get(LOG.format("train") + "?tailLines=3&limitBytes=10")
    assert cut.body.decode() == "step 6: lo"


def test_previous_reads_the_instance_before_the_restart(
    server: FakeApiServer, raw: RawClient
) -> None:
    answer = raw.get(LOG.format("train") + "?container=cuda&previous=true")
    assert answer.body.decode() == "CUDA error: boom\n"
    never = raw.get(LOG.format("pair") + "?container=cuda&previous=true")
    assert never.status == 400
    assert never.json()["message"] == 'previous terminated container "cuda" in pod "pair" not found'


def test_refusals_are_status_objects_in_the_real_wording(
    server: FakeApiServer, raw: RawClient
) -> None:
    several = raw.get(LOG.format("pair"))
    assert (several.status, several.json()["message"]) == (
        400,
        "a container name must be specified for pod pair, choose one of: [cuda sidecar]",
    )
    missing = raw.get(LOG.format("gone"))
    assert (missing.status, missing.json()["message"]) == (404, 'pods "gone" not found')
    wrong = raw.get(LOG.format("train") + "?container=nope")
    assert (wrong.status, wrong.json()["reason"]) == (400, "BadRequest")
    assert wrong.json()["message"] == "container nope is not valid for pod train"


def test_rbac_on_pods_log_is_separate_from_pods(server: FakeApiServer, raw: RawClient) -> None:
    server.deny("get", "pods/log", namespace="default")
    assert raw.get("/api/v1/namespaces/default/pods/train").status == 200
    denied = raw.get(LOG.format("train"))
    assert denied.status == 403
    assert 'cannot get resource "pods/log" in API group ""' in denied.json()["message"]


def test_discovery_lists_the_log_subresource(server: FakeApiServer, raw: RawClient) -> None:
    resources = raw.get("/api/v1").json()["resources"]
    [log] = [r for r in resources if r["name"] == "pods/log"]
    assert log["verbs"] == ["get"] and log["kind"] == "Pod"


def test_real_kubectl_reads_a_tail(server: FakeApiServer, kubectl: KubectlRunner) -> None:
    done = kubectl("logs", "train", "-c", "cuda", "--tail", "5")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == LINES[-5:]
    sidecar = kubectl("logs", "pair", "-c", "sidecar")
    assert sidecar.stdout == "sidecar up\n"
    previous = kubectl("logs", "train", "--previous")
    assert previous.stdout == "CUDA error: boom\n"


def test_a_crash_looping_program_leaves_its_reason_in_its_logs(
    sim_cluster: MakeSimCluster, tmp_path: Path
) -> None:
    bad = "version: v1\nflags:\n  plugin:\n    deviceIDStrategy: serial\n"
    controllers = ("daemonsets", "scheduler", "kubelet", "device-plugin")
    cluster = sim_cluster(
        [NodeSpec("gpu-a", "L4", 1)], "helm", {"any": bad}, "any", controllers=controllers
    )
    plugin = cluster.plugin_pod("gpu-a")
    assert plugin is not None
    namespace, name = plugin["metadata"]["namespace"], plugin["metadata"]["name"]
    deadline = time.monotonic() + 10
    while restarts(cluster) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert restarts(cluster) >= 2
    kubectl = kubectl_for(cluster, tmp_path)
    container = cluster.layout.plugin_container if cluster.layout else ""
    current = kubectl("logs", "-n", namespace, name, "-c", container, "--tail", "5")
    previous = kubectl("logs", "-n", namespace, name, "-c", container, "--previous")
    assert current.returncode == 0 and previous.returncode == 0, current.stderr + previous.stderr
    # upstream's own words, from the simulated plugin (tests/fakes/cluster/pluginfields.py)
    reason = "invalid --device-id-strategy option: serial"
    assert reason in current.stdout.splitlines()[-1] and reason in previous.stdout


def restarts(cluster: SimCluster) -> int:
    pod = cluster.plugin_pod("gpu-a") or {}
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    mine = [s for s in statuses if s["name"] == "nvidia-device-plugin-ctr"]
    return int(mine[0].get("restartCount") or 0) if mine else 0
