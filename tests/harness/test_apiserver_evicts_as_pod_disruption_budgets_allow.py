"""The stand-in's `pods/eviction` answers as kube-apiserver's: a pod without a budget is
deleted, a budget at its minimum refuses with 429 and names itself, percentages count, two
budgets are a 500, a Pending pod is evicted whatever its budget; and the real `kubectl drain`,
which evicts through it, is held up by the budget and then goes through."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.apiserver import FakeApiServer
from tests.fakes.apiserver.rawclient import RawClient
from tests.fakes.cluster import NodeSpec, SimCluster
from tests.fakes.cluster.fixture import MakeSimCluster, kubectl_for
from tests.fakes.cluster.fixture import sim_cluster as sim_cluster

EVICT = "/api/v1/namespaces/default/pods/{}/eviction"


def pod(name: str, app: str = "train", phase: str = "Running") -> dict[str, Any]:
    ready = "True" if phase == "Running" else "False"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
        "spec": {"containers": [{"name": "cuda", "image": "cuda"}]},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]},
    }


def budget(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "train"}}, **spec},
    }


def eviction(name: str) -> bytes:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}
    return json.dumps(body).encode()


def post(raw: RawClient, name: str) -> Any:
    return raw.request("POST", EVICT.format(name), eviction(name))


def test_a_pod_without_a_budget_is_evicted(fake_apiserver: FakeApiServer, raw: RawClient) -> None:
    fake_apiserver.store.create(pod("a"))
    answer = post(raw, "a")
    assert answer.status == 201 and json.loads(answer.body)["status"] == "Success"
    assert fake_apiserver.store.list("pods", "default") == []


@pytest.mark.parametrize(
    ("spec", "evictable"),
    [
        ({"minAvailable": 2}, False),
        ({"minAvailable": 1}, True),
        ({"maxUnavailable": 0}, False),
        ({"maxUnavailable": "50%"}, True),
        ({"minAvailable": "100%"}, False),
    ],
)
def test_a_budget_allows_only_what_it_spares(
    fake_apiserver: FakeApiServer, raw: RawClient, spec: dict[str, Any], evictable: bool
) -> None:
    for name in ("a", "b"):
        fake_apiserver.store.create(pod(name))
    fake_apiserver.store.create(budget("train-pdb", **spec))
    answer = post(raw, "a")
    if evictable:
        assert answer.status == 201
        return
    status = json.loads(answer.body)
    assert (answer.status, status["reason"]) == (429, "TooManyRequests")
    assert status["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    [cause] = status["details"]["causes"]
    assert cause["reason"] == "DisruptionBudget" and "train-pdb" in cause["message"]
    assert len(fake_apiserver.store.list("pods", "default")) == 2


def test_two_budgets_are_refused_and_a_pending_pod_goes_anyway(
    fake_apiserver: FakeApiServer, raw: RawClient
) -> None:
    fake_apiserver.store.create(pod("a"))
    fake_apiserver.store.create(pod("waiting", phase="Pending"))
    fake_apiserver.store.create(budget("one", minAvailable=5))
    fake_apiserver.store.create(budget("two", minAvailable=5))
    assert post(raw, "a").status == 500
    assert post(raw, "waiting").status == 201


def test_real_kubectl_drain_waits_for_the_budget(
    sim_cluster: MakeSimCluster, tmp_path: Path
) -> None:
    cluster: SimCluster = sim_cluster([NodeSpec("gpu-a", "L4", 1)], controllers=("kubelet",))
    train = pod("train")
    train["spec"]["nodeName"] = "gpu-a"
    cluster.store.create(train, keep_status=False)
    cluster.settle()
    cluster.store.create(budget("train-pdb", minAvailable=1))
    kubectl = kubectl_for(cluster, tmp_path)
    # --force: `train` has no controller; kubectl still evicts it through pods/eviction

    held = kubectl("drain", "gpu-a", "--timeout=2s", "--ignore-daemonsets", "--force")
    assert held.returncode != 0
    assert "Cannot evict pod as it would violate the pod's disruption budget" in held.stderr
    assert cluster.store.get("nodes", "gpu-a")["spec"]["unschedulable"] is True

    cluster.store.delete("poddisruptionbudgets", "train-pdb", "default")
    done = kubectl("drain", "gpu-a", "--timeout=10s", "--ignore-daemonsets", "--force")
    assert done.returncode == 0, done.stderr
    assert "pod/train evicted" in done.stdout
    assert cluster.store.list("pods", "default") == []
