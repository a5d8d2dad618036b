"""The real agent runs inside its node's network namespace and still talks to the API server.

Inside the namespace only the node's own addresses exist; the agent's kubeconfig still says
https://127.0.0.1:PORT with the server's own certificate, and a relay on the namespace's loopback
carries it to the host's. The node's InternalIP is there as well, so `kubectl logs` reaches the
node's kubelet endpoint. Proof that the agent gets through: the agent acts on a label the test sets
(it removes a MIG state label no request stands behind). Once the agent has its usage endpoint
(`--usage-port`), the API server's pod proxy reaches that too, on the agent pod's own IP, and
its answer names the pod a GPU process belongs to.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import subprocess
from collections.abc import Callable

import pytest

from kubectl_gpu import keys
from tests.conftest import eventually as retried
from tests.journey.fixtures import Kubectl
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.plane import netns

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.timeout(150),
    pytest.mark.skipif(netns.unavailable() is not None, reason=str(netns.unavailable())),
]


GPU_POD = json.dumps({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "infer", "annotations": {"sim.kubectl-gpu.io/gpu-memory": "5Gi"}},
    "spec": {"nodeName": "gpu-a", "containers": [
        {"name": "server", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
         "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
})  # fmt: skip


eventually = functools.partial(retried, timeout=40.0, pause=0.3)


def test_the_agent_runs_in_its_node_namespace_and_reaches_the_api_server(
    sim_cluster: MakeSimCluster, kubectl: Callable[[SimCluster], Kubectl]
) -> None:
    cluster = sim_cluster(
        [NodeSpec("gpu-a", "L4", 1)], agents=True, node_networks=True, gpu_processes=True
    )
    k = kubectl(cluster)
    installed = k("gpu", "install")
    assert installed.returncode == 0, installed.stderr
    assert cluster.agents is not None
    pid = eventually(lambda: cluster.agents.pid("gpu-a") if cluster.agents else None)
    assert pid, "no agent process started"
    network = cluster.networks["gpu-a"]
    inside = subprocess.run(["ip", "netns", "pids", network.name], capture_output=True, text=True)
    # the agent itself (nsenter execs it: same PID) runs in the namespace
    assert str(pid) in inside.stdout.split(), inside

    labelled = k("label", "node", "gpu-a", f"{keys.MIG_STATE_LABEL}=pending")
    assert labelled.returncode == 0, labelled.stderr

    def label_gone() -> bool:
        labels = cluster.store.get("nodes", "gpu-a")["metadata"].get("labels") or {}
        return keys.MIG_STATE_LABEL not in labels

    assert eventually(label_gone), "the agent in the namespace never acted on its node"

    listed = k("get", "pods", "-n", keys.NAMESPACE, "-o", "json",
               "--field-selector", "spec.nodeName=gpu-a")  # fmt: skip
    pod = json.loads(listed.stdout)["items"][0]
    assert pod["status"]["podIP"] in network.addresses
    assert ipaddress.IPv4Address(pod["status"]["podIP"]) in network.pod_network
    # the node's own InternalIP lives in the namespace too: the API server reaches the node's
    # kubelet endpoint (KWOK's server, through a relay) there for `kubectl logs`
    assert pod["status"]["hostIP"] == network.address
    logs = k("logs", "-n", keys.NAMESPACE, pod["metadata"]["name"])
    assert logs.returncode == 0 and logs.stdout.strip(), logs.stderr
    # a GPU pod's process, which the agent ties to the pod through its cgroup file
    applied = k("apply", "-f", "-", stdin=GPU_POD)
    assert applied.returncode == 0, applied.stderr
    uid = eventually(
        lambda: cluster.gpu_processes("gpu-a") and cluster.gpu_processes("gpu-a")[0].pod_uid
    )
    assert uid, "the GPU pod got no process"
    name = pod["metadata"]["name"]
    path = f"/api/v1/namespaces/{keys.NAMESPACE}/pods/{name}:9402/proxy/v1/usage"
    got = eventually(lambda: (r := k("get", "--raw", path)).returncode == 0 and uid in r.stdout)
    assert got, k("get", "--raw", path)
