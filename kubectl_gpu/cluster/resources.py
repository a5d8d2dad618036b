"""The REST paths of the resources kubectl-gpu reads and writes.

Owns the table of resources (API prefix, plural, namespaced or not) and turning a resource,
a name and a namespace into a URL path. Must not send anything (that is `api.py`).
"""

from __future__ import annotations

from urllib.parse import quote

# path prefix, plural, namespaced
RESOURCES: dict[str, tuple[str, str, bool]] = {
    "nodes": ("/api/v1", "nodes", False),
    "pods": ("/api/v1", "pods", True),
    "configmaps": ("/api/v1", "configmaps", True),
    "events": ("/api/v1", "events", True),
    "resourcequotas": ("/api/v1", "resourcequotas", True),
    "namespaces": ("/api/v1", "namespaces", False),
    "daemonsets": ("/apis/apps/v1", "daemonsets", True),
    "clusterpolicies": ("/apis/nvidia.com/v1", "clusterpolicies", False),
    "customresourcedefinitions": (
        "/apis/apiextensions.k8s.io/v1",
        "customresourcedefinitions",
        False,
    ),
    "gpunodereports": ("/apis/kubectl-gpu.io/v1", "gpunodereports", False),
    "runtimeclasses": ("/apis/node.k8s.io/v1", "runtimeclasses", False),
    "resourceclaims": ("/apis/resource.k8s.io/v1", "resourceclaims", True),
    "resourceslices": ("/apis/resource.k8s.io/v1", "resourceslices", False),
    "deviceclasses": ("/apis/resource.k8s.io/v1", "deviceclasses", False),
    "serviceaccounts": ("/api/v1", "serviceaccounts", True),
    "clusterroles": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "clusterrolebindings": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "roles": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "rolebindings": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "validatingadmissionpolicies": (
        "/apis/admissionregistration.k8s.io/v1",
        "validatingadmissionpolicies",
        False,
    ),
    "validatingadmissionpolicybindings": (
        "/apis/admissionregistration.k8s.io/v1",
        "validatingadmissionpolicybindings",
        False,
    ),
}


def path(
    resource: str, name: str | None = None, namespace: str | None = None, version: str = ""
) -> str:
    """The REST path of a resource, a namespace of it, or one object (and `/status` etc.);
    `version` picks another served version of the resource's group (`v1beta1`)."""
    prefix, plural, namespaced = RESOURCES[resource]
    if version:
        prefix = f"{prefix.rpartition('/')[0]}/{version}"
    parts = [prefix]
    if namespaced and namespace:
        parts.append(f"/namespaces/{quote(namespace, safe='')}")
    parts.append(f"/{plural}")
    if name:
        parts.append(f"/{quote(name, safe='')}")
    return "".join(parts)


def proxy_path(namespace: str, pod: str, port: int, path: str) -> str:
    """The API server's pod proxy to `path` on a pod's port:
    `/api/v1/namespaces/NS/pods/NAME:PORT/proxy/PATH` (needs `get pods/proxy`). The API
    server connects to the pod's IP itself; nothing here reaches a pod directly."""
    base = path_of_pod(namespace, pod)
    return f"{base}:{int(port)}/proxy/{path.lstrip('/')}"


def path_of_pod(namespace: str, pod: str) -> str:
    """One pod's REST path."""
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(pod, safe='')}"
