"""Plain Kubernetes objects for tests to create: nodes, pods and CRDs.

Owns dict builders with the fields kubectl's printers and our code read (a node's Ready
condition and full nodeInfo, a pod's node, phase and container statuses), and the shape of
NVIDIA's ClusterPolicy CRD (group nvidia.com, v1, cluster-scoped, status subresource) as the
GPU Operator installs it, minus its OpenAPI schema. Must not talk to a server: tests pass the
results to `store.create()` or to a client, and decide when "the GPU Operator is installed".
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def node(name: str, *, labels: dict[str, str] | None = None, ready: bool = True) -> Obj:
    condition = {"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {},
        "status": {
            "conditions": [condition],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "nodeInfo": {  # every field: kubernetes 37's models reject a partial nodeInfo
                "architecture": "amd64",
                "bootID": "7d4c1c55-0b1e-4c3f-9d36-1f0a8d1e2b3c",
                "containerRuntimeVersion": "containerd://1.7.24",
                "kernelVersion": "5.15.0-126-generic",
                "kubeProxyVersion": "",
                "kubeletVersion": "v1.32.0",
                "machineID": "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
                "operatingSystem": "linux",
                "osImage": "Ubuntu 22.04.4 LTS",
                "systemUUID": "4c4c4544-0042-3510-8052-b7c04f4e3432",
            },
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        },
    }


def pod(
    name: str,
    namespace: str = "default",
    *,
    node_name: str = "",
    phase: str = "Running",
    labels: dict[str, str] | None = None,
    gpus: int = 0,
) -> Obj:
    image = "registry.example/cuda:12"
    container: Obj = {"name": "main", "image": image}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    running = phase == "Running"
    status: Obj = {"phase": phase}
    if running:
        status["containerStatuses"] = [
            {
                "name": "main",
                "image": image,
                "imageID": f"{image}@sha256:{'0' * 64}",
                "ready": True,
                "restartCount": 0,
                "state": {"running": {}},
            }
        ]
    spec: Obj = {"containers": [container]}
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": spec,
        "status": status,
    }


def custom_resource_definition(
    group: str,
    kind: str,
    plural: str,
    *,
    namespaced: bool = True,
    versions: tuple[str, ...] = ("v1",),
    short_names: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A minimal apiextensions.k8s.io/v1 CRD with a status subresource on every version."""
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced" if namespaced else "Cluster",
            "names": {
                "plural": plural,
                "singular": kind.lower(),
                "kind": kind,
                "listKind": f"{kind}List",
                **({"shortNames": list(short_names)} if short_names else {}),
            },
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": index == 0,
                    "schema": schema,
                    "subresources": {"status": {}},
                }
                for index, version in enumerate(versions)
            ],
        },
    }


def cluster_policy_crd() -> dict[str, Any]:
    """The GPU Operator's ClusterPolicy CRD (clusterpolicies.nvidia.com, cluster-scoped)."""
    return custom_resource_definition(
        "nvidia.com", "ClusterPolicy", "clusterpolicies", namespaced=False
    )
