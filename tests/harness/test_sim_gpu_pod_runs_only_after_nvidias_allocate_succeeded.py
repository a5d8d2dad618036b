"""A pod asking for `nvidia.com/*` on a simulated node becomes Running only after the kubelet
stand-in's Allocate on NVIDIA's device plugin succeeded, as on a kubelet: KWOK holds it Pending
until the node's kubelet has admitted it (tests/kit/node/admission.py). A pod whose Allocate
NVIDIA's plugin refuses goes Failed with the kubelet's UnexpectedAdmissionError and is never
Running, not even for a moment."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.kit.cluster import NodeSpec
from tests.kit.cluster.fixture import MakeSimCluster, kubectl_for
from tests.kit.plane.kwok import ADMITTED

pytestmark = [pytest.mark.kubectl, pytest.mark.timeout(180)]

MPS_2 = """version: v1
sharing:
  mps:
    resources:
    - name: nvidia.com/gpu
      replicas: 2
"""


def gpu_pod(name: str, gpus: int) -> str:
    container = {
        "name": "cuda",
        "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
    }
    spec = {"containers": [container]}
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})


def test_running_comes_after_allocate_and_a_refused_allocate_never_runs(
    sim_cluster: MakeSimCluster, tmp_path: Path
) -> None:
    cluster = sim_cluster(
        [NodeSpec("gpu-1", "H100-SXM5-80GB", 1)], layout="helm", configs={"mps": MPS_2}
    )
    assert cluster.allocatable("gpu-1") == 2
    seen: dict[str, list[tuple[str, bool]]] = {}  # pod -> (phase, admitted) as watched
    lock = threading.Lock()

    def watch(kind: str, key: Any, obj: dict[str, Any]) -> None:
        if obj.get("kind") == "Pod" and obj["metadata"]["name"] in ("fits", "greedy"):
            phase = (obj.get("status") or {}).get("phase") or ""
            noted = ADMITTED in (obj["metadata"].get("annotations") or {})
            with lock:
                seen.setdefault(obj["metadata"]["name"], []).append((phase, noted))

    unsubscribe = cluster.store.subscribe(watch)
    try:
        kubectl = kubectl_for(cluster, tmp_path)
        # failRequestsGreaterThanOne (MPS's default): NVIDIA's Allocate refuses two replicas
        assert kubectl("apply", "-f", "-", stdin=gpu_pod("greedy", 2)).returncode == 0
        assert kubectl("apply", "-f", "-", stdin=gpu_pod("fits", 1)).returncode == 0
        cluster.settle()
    finally:
        unsubscribe()

    greedy = cluster.store.get("pods", "greedy", "default")
    assert (greedy["status"]["phase"], greedy["status"]["reason"]) == (
        "Failed",
        "UnexpectedAdmissionError",
    )
    assert greedy["status"]["message"].startswith(
        "Pod was rejected: Allocate failed due to rpc error: code = Unknown desc = "
    )
    assert "maximum request size for shared resources is 1; found 2" in greedy["status"]["message"]
    with lock:
        assert all(phase != "Running" for phase, _ in seen["greedy"]), seen["greedy"]
        assert not any(noted for _, noted in seen["greedy"])
        fits = list(seen["fits"])
    assert cluster.store.get("pods", "fits", "default")["status"]["phase"] == "Running"
    assert all(noted for phase, noted in fits if phase == "Running"), fits  # admitted first
    [allocation] = [a for a in cluster.allocations("gpu-1") if a.pod == "fits"]
    assert allocation.device_ids[0].startswith(cluster.node_gpus("gpu-1")[0].uuid + "::")
