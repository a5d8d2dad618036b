"""Everything the simulated controllers write deserialises in the real kubernetes client.

kubernetes 37's generated models reject partial objects (a container status without imageID,
a condition without status); a stand-in that wrote one would break the product's reads.
"""

from __future__ import annotations

import json

import pytest
from kubernetes import client, config

from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

BAD = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: gpu, replicas: 1}\n"


def gpu_pod(name: str, gpus: int, node: str = "") -> dict[str, object]:
    spec: dict[str, object] = {
        "containers": [
            {
                "name": "cuda",
                "image": "cuda:12",
                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
            }
        ]
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


# This cluster never rests for long: gpu-a's plugin, GFD and gpu-b's sidecar crash-loop on
# their own back-offs and GFD relabels the other nodes every few seconds, so on a loaded
# machine two quiet looks in a row may take longer than `settle`'s default 30 s.
SETTLE_S = 90.0


def busy(cluster: SimCluster) -> None:
    """Put the cluster in every state the controllers can write."""
    labels = {"gpu-a": "bad", "gpu-b": "missing"}
    for node, key in labels.items():
        body = {"metadata": {"labels": {"nvidia.com/device-plugin.config": key}}}
        cluster.store.patch("nodes", node, body)
    cluster.settle(SETTLE_S)
    pod = cluster.plugin_pod("gpu-b")
    if pod is not None:  # a fresh pod under a missing key: init container blocked
        cluster.store.delete("pods", pod["metadata"]["name"], pod["metadata"]["namespace"])
        cluster.settle(SETTLE_S)  # else the scheduler may still see gpu-b's old allocatable
    cluster.store.create(gpu_pod("fits", 1))
    cluster.store.create(gpu_pod("too-big", 64))
    cluster.store.create(gpu_pod("pinned", 9, node="gpu-c"))
    cluster.settle(SETTLE_S)


@pytest.mark.parametrize("layout", ["gpu-operator", "helm", "static"])
def test_every_written_object_reads_back_through_the_client(
    sim_cluster: MakeSimCluster, layout: str
) -> None:
    nodes = [
        NodeSpec("gpu-a", "H100-SXM5-80GB", 2),
        NodeSpec("gpu-b", "A30", 1),
        NodeSpec("gpu-c", "L4", 1),
        NodeSpec("cpu-1"),
    ]
    cluster = sim_cluster(
        nodes,
        layout=layout,
        configs={"default": "version: v1\n", "bad": BAD},
        default_config="default",
    )
    busy(cluster)
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    try:
        core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
        pods = core.list_pod_for_all_namespaces()
        phases: dict[str, str] = {}
        for pod in pods.items:
            assert pod.metadata is not None and pod.status is not None
            phases[str(pod.metadata.name)] = str(pod.status.phase)
            assert all(s.image_id is not None for s in pod.status.container_statuses or [])
        assert phases["fits"] == "Running" and phases["too-big"] == "Pending"
        assert phases["pinned"] == "Failed"
        assert len(core.list_node().items) == 4
        assert apps.list_daemon_set_for_all_namespaces().items
        assert apps.list_controller_revision_for_all_namespaces().items
        reasons = {e.reason for e in core.list_event_for_all_namespaces().items}
        assert {"FailedScheduling", "Scheduled", "UnexpectedAdmissionError"} <= reasons
        if layout != "static":
            assert "BackOff" in reasons
    finally:
        api.close()
    json.dumps(cluster.store.list("pods"))  # and plain JSON, as kubectl reads it
