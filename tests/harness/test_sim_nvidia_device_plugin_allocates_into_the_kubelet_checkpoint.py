"""A GPU pod on a node running NVIDIA's own device plugin gets the devices NVIDIA's plugin
hands out: the kubelet stand-in asks it over the kubelet's gRPC (GetPreferredAllocation, which
v0.19.3 offers, then Allocate), and writes its answer into the device-manager checkpoint and
PodResources, where kubectl-gpu's agent and `map` read them on a real node.

Time-slicing with 4 replicas on an H100×2: the pod's device is a replica ID `GPU-…::N` of one of
the node's GPUs, the checkpoint's AllocResp is NVIDIA's own answer (NVIDIA_VISIBLE_DEVICES the
physical UUID, no replica suffix), and PodResources lists the same ID for the pod's container.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from kubectl_gpu._proto.deviceplugin.v1beta1 import allocate_pb2
from kubectl_gpu._proto.podresources.v1 import api_pb2, api_pb2_grpc
from tests.kit.cluster import NodeSpec
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.node import sandbox
from tests.kit.plane import netns

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.timeout(180),
    pytest.mark.skipif(sandbox.unavailable() is not None, reason=str(sandbox.unavailable())),
    pytest.mark.skipif(netns.unavailable() is not None, reason=str(netns.unavailable())),
]

TIME_SLICED = (
    "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
    "    - name: nvidia.com/gpu\n      replicas: 4\n"
)


def eventually(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def gpu_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "containers": [
                {
                    "name": "cuda",
                    "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ]
        },
    }


def test_a_pods_replica_comes_from_nvidias_allocate_into_checkpoint_and_podresources(
    sim_cluster: MakeSimCluster,
) -> None:
    cluster = sim_cluster(
        [NodeSpec("gpu-1", "H100-SXM5-80GB", 2)],
        "helm",
        {"ts": TIME_SLICED},
        "ts",
        node_networks=True,
        agents=True,
    )
    eventually("8 replicas", lambda: cluster.allocatable("gpu-1") == 8)
    cluster.store.create(gpu_pod("trainer"))

    def running() -> bool:
        pod = cluster.store.get("pods", "trainer", "default")
        return (pod.get("status") or {}).get("phase") == "Running"

    eventually("the pod Running", running)
    cluster.settle(20)
    uid = cluster.store.get("pods", "trainer", "default")["metadata"]["uid"]
    uuids = {g.uuid for g in cluster.node_gpus("gpu-1")}

    kubelet_root = cluster.sides["gpu-1"].kubelet_root
    checkpoint = kubelet_root / "device-plugins" / "kubelet_internal_checkpoint"

    def entry() -> dict[str, Any] | None:
        if not checkpoint.exists():
            return None
        document = json.loads(checkpoint.read_text(encoding="utf-8"))
        # `null` until the kubelet stand-in has written an entry (the real kubelet writes so too)
        entries = document["Data"].get("PodDeviceEntries") or []
        found = [e for e in entries if e["PodUID"] == uid]
        return found[0] if found else None

    written = eventually("the pod in the checkpoint", entry)
    [device] = [i for ids in written["DeviceIDs"].values() for i in ids]
    physical, _, replica = device.partition("::")
    assert physical in uuids and replica in {"0", "1", "2", "3"}, device
    answer = allocate_pb2.ContainerAllocateResponse.FromString(
        base64.b64decode(written["AllocResp"])
    )
    # NVIDIA's own Allocate answer (envvar strategy): the physical GPU, not the replica ID
    assert dict(answer.envs)["NVIDIA_VISIBLE_DEVICES"] == physical
    assert (uid, "cuda", "nvidia.com/gpu") in cluster.nvidia_plugin.responses

    socket = kubelet_root / "pod-resources" / "kubelet.sock"
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        listed = api_pb2_grpc.PodResourcesListerStub(channel).List(
            api_pb2.ListPodResourcesRequest(), timeout=10
        )
    [pod] = [p for p in listed.pod_resources if p.name == "trainer"]
    [container] = pod.containers
    assert [(d.resource_name, list(d.device_ids)) for d in container.devices] == [
        ("nvidia.com/gpu", [device])
    ]
