"""Agents at rest cost the API server nothing: between resyncs a running agent sends no request
(it learns of changes through its watches), and a label set on its Node reaches it through the
watch, long before its resync, while the other agents stay quiet.

Uses only the API and the `agent_fleet` fixture (kubeconfig, nodes, each agent's requests as
the real kube-apiserver's audit log counts them)."""

from __future__ import annotations

import functools
import time

import pytest

from kubectl_gpu import cluster, keys
from kubectl_gpu.errors import ClusterError
from tests.agent.fixtures import Fleet
from tests.conftest import eventually as retried

DISABLED = "version: v1\nmig-configs:\n  all-disabled:\n  - devices: all\n    mig-enabled: false\n"
pytestmark = pytest.mark.timeout(240)  # the real control plane starts once per session
QUIET_S = 3.0  # several of the agents' --interval (0.5 s): a poller would have asked by then


eventually = functools.partial(retried, timeout=60.0, pause=0.1)


def settled(fleet: Fleet) -> dict[str, int]:
    """Every agent's request count, once none has changed for QUIET_S (start-up is over)."""

    def counts() -> dict[str, int]:
        return {n: len(fleet.requests(n)) for n in fleet.nodes}

    def quiet() -> dict[str, int] | None:
        before = counts()
        if not all(before.values()):
            return None  # an agent has not started yet
        time.sleep(QUIET_S)
        return before if counts() == before else None

    found = eventually(quiet)
    assert found, f"the agents never came to rest: {counts()}"
    return dict(found)


def test_agents_at_rest_send_nothing_and_a_label_reaches_one_through_its_watch(
    agent_fleet: Fleet,
) -> None:
    api = cluster.connect(str(agent_fleet.kubeconfig))
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": keys.MIG_CONFIGMAP, "namespace": keys.NAMESPACE},
        "data": {},
    }
    path = cluster.path("configmaps", keys.MIG_CONFIGMAP, keys.NAMESPACE)
    try:
        api.create(cluster.path("configmaps", namespace=keys.NAMESPACE), configmap)
    except ClusterError as e:  # a real server shared with other tests: start it empty
        if e.status != 409:
            raise
        api.replace(path, {**configmap, "metadata": api.get(path)["metadata"]})
    reports = {r["metadata"]["name"] for r in api.list(cluster.path("gpunodereports"))}
    assert eventually(
        lambda: (
            set(agent_fleet.nodes)
            <= {r["metadata"]["name"] for r in api.list(cluster.path("gpunodereports"))}
        )
    ), f"not every agent published its report: {sorted(reports)}"
    at_rest = settled(agent_fleet)

    time.sleep(QUIET_S)  # at rest: many intervals, no resync

    assert {n: len(agent_fleet.requests(n)) for n in agent_fleet.nodes} == at_rest
    for node in agent_fleet.nodes:  # what keeps them informed: a watch on their own Node
        sent = agent_fleet.requests(node)
        assert any("/api/v1/nodes?" in r and "watch=true" in r and node in r for r in sent), sent

    target, *others = agent_fleet.nodes
    body = {"metadata": {"labels": {keys.MIG_DESIRED_LABEL: "all-disabled"}}}
    api.patch(cluster.path("nodes", target), body)

    def reported() -> str:
        labels = api.get(cluster.path("nodes", target))["metadata"].get("labels") or {}
        return str(labels.get(keys.MIG_STATE_LABEL, ""))

    assert eventually(reported) == "failed"  # its resync is an hour away: the watch told it
    reason = api.get(cluster.path("nodes", target))["metadata"]["annotations"]
    assert "config all-disabled is not in" in reason[keys.MIG_REASON_ANNOTATION]
    assert len(agent_fleet.requests(target)) > at_rest[target]
    for node in others:  # a change on one Node wakes only that Node's agent
        assert len(agent_fleet.requests(node)) == at_rest[node], agent_fleet.requests(node)

    # The config arrives in the ConfigMap, which every agent watches too.
    api.patch(path, {"data": {"all-disabled": DISABLED}})
    assert eventually(lambda: reported() != "failed"), reason
