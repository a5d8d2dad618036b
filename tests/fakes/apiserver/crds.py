"""Ready-made CustomResourceDefinitions the stand-in does not serve until a test creates them.

Owns the shape of NVIDIA's ClusterPolicy CRD (group nvidia.com, version v1, cluster-scoped,
kind ClusterPolicy, plural clusterpolicies, status subresource), as the GPU Operator installs
it, minus its OpenAPI schema. Must not create anything itself: a test decides when the GPU
Operator "is installed".
"""

from __future__ import annotations

from typing import Any


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
