"""What NVIDIA's DRA driver Helm chart (dra-driver-nvidia-gpu v0.4.1) installs besides its kubelet
plugin's pods: the DeviceClasses `gpu.nvidia.com` and `mig.nvidia.com`, and the kubelet plugin's
ServiceAccount with the roles its templates grant it (rbac-kubeletplugin.yaml: read
ResourceClaims, pods and nodes, write ResourceSlices; with MPSSupport, manage Deployments in the
driver's namespace; docs/simulated-dra.md).

Owns those objects, per served `resource.k8s.io` version (the chart's `gpu.nvidia.com` class
carries `extendedResourceName: nvidia.com/gpu` only on v1, KEP-5004). Must not publish
ResourceSlices: NVIDIA's kubelet plugin does (tests/kit/node/draplugin.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Obj = dict[str, Any]
DRIVER = "gpu.nvidia.com"
GROUP = "resource.k8s.io"
NAMESPACE = "nvidia-dra-driver-gpu"
SERVICE_ACCOUNT = "nvidia-dra-driver-gpu-service-account-kubeletplugin"
CLUSTER_ROLE = "nvidia-dra-driver-gpu-clusterrole-kubeletplugin"
ROLE = "nvidia-dra-driver-gpu-role-kubeletplugin"


def device_classes(version: str = "v1") -> list[Obj]:
    """The chart's DeviceClasses (deviceclass-gpu.yaml, deviceclass-mig.yaml)."""
    found = []
    for name, kind in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig")):
        spec: Obj = {
            "selectors": [
                {
                    "cel": {
                        "expression": f"device.driver == '{DRIVER}' && "
                        f"device.attributes['{DRIVER}'].type == '{kind}'"
                    }
                }
            ]
        }
        if kind == "gpu" and version == "v1":
            spec["extendedResourceName"] = "nvidia.com/gpu"
        found.append(
            {
                "apiVersion": f"{GROUP}/{version}",
                "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": spec,
            }
        )
    return found


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> Obj:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def kubelet_plugin_rbac(feature_gates: Sequence[str] = ()) -> list[Obj]:
    """The kubelet plugin's namespace, ServiceAccount, ClusterRole and binding, and its Role in
    the driver's namespace: `computedomaincliques`, and with `MPSSupport=true` among the
    `feature_gates` the Deployments of the MPS control daemons it makes at an MPS claim's
    prepare (rbac-kubeletplugin.yaml)."""
    read = ["get", "list", "watch"]
    namespaced = [_rule(["resource.nvidia.com"], ["computedomaincliques"], ["get"])]
    if "MPSSupport=true" in feature_gates:
        write = ["create", "update", "patch", "delete"]
        namespaced.append(_rule(["apps"], ["deployments"], [*read, *write]))
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": CLUSTER_ROLE},
            "rules": [
                _rule(["resource.nvidia.com"], ["computedomains"], read),
                _rule([GROUP], ["resourceclaims"], read),
                _rule([GROUP], ["resourceslices"], [*read, "create", "update", "delete"]),
                _rule([""], ["nodes"], [*read, "update"]),
                _rule([""], ["pods"], read),
            ],
        },
        _binding("ClusterRoleBinding", CLUSTER_ROLE, f"{CLUSTER_ROLE}-binding"),
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": ROLE, "namespace": NAMESPACE},
            "rules": namespaced,
        },
        _binding("RoleBinding", ROLE, f"{ROLE}-binding"),
    ]


def _binding(kind: str, role: str, name: str) -> Obj:
    """`kind` (ClusterRoleBinding or RoleBinding) granting `role` to the plugin's account."""
    metadata: Obj = {"name": name}
    if kind == "RoleBinding":
        metadata["namespace"] = NAMESPACE
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": metadata,
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}],
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": kind.removesuffix("Binding"),
            "name": role,
        },
    }
