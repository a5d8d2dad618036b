"""Pods and objects for the `kubectl gpu doctor` CLI tests (not a test module)."""

from __future__ import annotations

from typing import Any

from tests.kit.cluster import SimCluster

H100 = "NVIDIA-H100-80GB-HBM3"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def gpu_pod(
    name: str,
    amount: str = "1",
    *,
    resource: str = "nvidia.com/gpu",
    selector: dict[str, str] | None = None,
    tolerate: bool = False,
    requests: str | None = None,
) -> dict[str, Any]:
    resources: dict[str, Any] = {"limits": {resource: amount}}
    if requests is not None:
        resources["requests"] = {resource: requests}
    spec: dict[str, Any] = {
        "containers": [
            {"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.4.1-base", "resources": resources}
        ]
    }
    if selector:
        spec["nodeSelector"] = selector
    if tolerate:
        spec["tolerations"] = [GPU_TOLERATION]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def run_pods(cluster: SimCluster, *pods: dict[str, Any]) -> None:
    for pod in pods:
        cluster.client.create(pod, keep_status=False)
    cluster.settle()


def by_layer(document: dict[str, Any], layer: str, severity: str = "error") -> list[dict[str, Any]]:
    return [d for d in document["diagnoses"] if d["layer"] == layer and d["severity"] == severity]
