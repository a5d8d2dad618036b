"""`kubectl logs` of an agent pod shows what that agent process wrote, the way a user reads it on a
real cluster: kubectl (the server's release) asks kube-apiserver, which finds the pod's node and
dials its kubelet endpoint (KWOK's server, TLS checked against the test CA), which streams the
container's log file (CRI format) that the node side wrote from the agent's own output.

Nothing here writes a log line for the agent: the line asserted is one the real agent logs when it
removes a state label that no request stands behind, put there by the test through kubectl."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable

import pytest

from kubectl_gpu import keys
from tests.conftest import eventually as retried
from tests.journey.fixtures import Kubectl
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(120)]
AGENT = "app.kubernetes.io/name=kubectl-gpu-agent"


eventually = functools.partial(retried, timeout=30.0, pause=0.3)


def agent_pod(k: Kubectl, node: str) -> str:
    listed = k("get", "pods", "-n", keys.NAMESPACE, "-l", AGENT,
               "--field-selector", f"spec.nodeName={node}", "-o", "json")  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    items = json.loads(listed.stdout)["items"]
    return str(items[0]["metadata"]["name"]) if items else ""


def test_kubectl_logs_of_an_agent_pod_shows_that_agents_lines(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl]
) -> None:
    cluster = sim_cluster([NodeSpec("gpu-a", "L4", 1), NodeSpec("gpu-b", "L4", 1)], agents=True)
    k = kubectl(cluster)
    installed = k("gpu", "install")
    assert installed.returncode == 0, installed.stderr
    pods = {node: eventually(lambda n=node: agent_pod(k, n)) for node in ("gpu-a", "gpu-b")}
    assert all(pods.values()), pods

    labelled = k("label", "node", "gpu-a", f"{keys.MIG_STATE_LABEL}=pending")
    assert labelled.returncode == 0, labelled.stderr
    said = f"node gpu-a: removing a {keys.MIG_STATE_LABEL} label no request stands behind"

    def logs_of(node: str) -> str:
        result = k("logs", "-n", keys.NAMESPACE, pods[node])
        return result.stdout if result.returncode == 0 else f"(failed) {result.stderr}"

    shown = eventually(lambda: said in logs_of("gpu-a") and logs_of("gpu-a"))
    assert shown, logs_of("gpu-a")
    # the agent's own format (time, level, message), not a line the harness made up
    line = next(line for line in shown.splitlines() if said in line)
    assert " INFO " in line
    # each pod's log is its own agent's: gpu-b's agent had nothing to remove
    assert said not in logs_of("gpu-b")
    # the kubelet's options reach the file: the last line only
    tail = k("logs", "-n", keys.NAMESPACE, pods["gpu-a"], "--tail", "1")
    assert tail.returncode == 0 and tail.stdout.count("\n") == 1, tail
