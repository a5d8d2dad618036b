"""KWOK on the control plane: its command line with its own "fast" stages (nodes Ready at once
and kept alive by Leases, pods Running), the gate that leaves some pods to the test's node side,
and its kubelet-like server, which every node names as its kubelet.

KWOK keeps every Node heartbeating (no status write per heartbeat, so a watcher of its Node is
not woken) and turns scheduled pods Running, all but those a test's node side plays itself
(LIFECYCLE_BY_TEST) and, with the node-side gate, those waiting for a kubelet's admission
(ADMITTED). Its server answers for every node's kubelet where the API server proxies `kubectl
logs` (TLS with a certificate of the test CA, which the API server checks; what it serves is
named by KWOK `Logs` objects, see containerlogs.py).

Owns the annotations of the gate, KWOK's `Logs` CRD, `argv` (which writes the stage files and
log configuration KWOK reads into the plane's directory) and `with_kubelet`. Must not spawn KWOK
(`ControlPlane` does) nor play a pod's lifecycle (the node side does, tests/kit/node).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.kit.plane import certs

# KWOK's `Logs` (kwok.x-k8s.io/v1alpha1): which file its server answers a container's logs
# from. KWOK watches these (--enable-crds) but does not define the CRD; this is the least of it.
LOGS_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "logs.kwok.x-k8s.io"},
    "spec": {
        "group": "kwok.x-k8s.io",
        "scope": "Namespaced",
        "names": {"plural": "logs", "singular": "logs", "kind": "Logs", "listKind": "LogsList"},
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}
# Pods annotated so are left to the test's own node side, which plays their whole lifecycle
# (KWOK's "fast" pod-ready stage would make every bound pod Running and Ready at once: a
# container that crashes at start would look Ready for a while, an init container that keeps
# failing could not hold its pod Pending).
LIFECYCLE_BY_TEST = "test.kubectl-gpu.io/lifecycle-by-node-side"
# With the node-side gate, a pod that asks for an extended resource (a device plugin's) or uses
# ResourceClaims becomes Running only once a kubelet has admitted it and annotated it ADMITTED,
# as a kubelet starts a pod's containers only after its device allocation succeeded and its
# DRA drivers prepared its claims (NodePrepareResources): on a node annotated
# NODE_SIDE_KUBELET the test's kubelet stand-in does (tests/kit), on any other node
# admitter.py admits it at once (no kubelet of its own to ask).
NODE_SIDE_KUBELET = "test.kubectl-gpu.io/kubelet"
ADMITTED = "test.kubectl-gpu.io/admitted"
# The gate (a gojq expression over the pod, KWOK's selector keys): "waiting" for a pod whose
# containers ask for an extended resource (a domain-prefixed name outside kubernetes.io), or
# that uses ResourceClaims, and that the kubelet stand-in has not admitted yet; nothing
# otherwise.
_WAITING_FOR_ADMISSION = (
    "if (([(.spec.containers // [])[], (.spec.initContainers // [])[] | .resources // {} "
    "| (.limits // {}), (.requests // {}) | keys[] "
    '| select(contains("/") and (startswith("kubernetes.io/") | not))] | length > 0) '
    "or ((.spec.resourceClaims // []) | length > 0)) "
    f'and (.metadata.annotations["{ADMITTED}"] == null) then "waiting" else empty end'
)


def argv(  # noqa: PLR0913 - one call site, each argument a different fact
    binary: Path,
    stages: Path,
    directory: Path,
    kubeconfig: Path,
    creds: certs.Credentials,
    *,
    address: str,
    port: int,
    lease_seconds: int,
    node_side_gate: bool,
) -> list[str | Path]:
    """KWOK's command line: its stages from the folder `stages` (pod-ready derived, see
    `_leaving_test_pods`), its server on `address:port`, files it reads in `directory`."""
    configs = [
        _leaving_test_pods(stage, directory, node_side_gate)
        if stage.name == "pod-ready.yaml"
        else stage
        for stage in sorted(stages.glob("*.yaml"))
    ]
    # A container nothing has written for has an empty log, as on a kubelet (KWOK answers
    # 400 "no logs found" for a pod no Logs object names, unless a ClusterLogs does).
    empty = directory / "empty.log"
    empty.touch()
    any_pod = directory / "kwok-logs.yaml"
    any_pod.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kwok.x-k8s.io/v1alpha1",
                "kind": "ClusterLogs",
                "metadata": {"name": "empty-unless-written"},
                "spec": {"logs": [{"logsFile": str(empty)}]},
            }
        )
    )
    return [
        binary,
        "--kubeconfig", kubeconfig,
        "--manage-all-nodes=true",
        "--node-lease-duration-seconds", str(lease_seconds),
        # a node made without addresses gets these from node-initialize
        "--node-ip", address,
        "--node-port", str(port),
        "--server-address", f"{address}:{port}",
        "--tls-cert-file", creds.kubelet_cert,
        "--tls-private-key-file", creds.kubelet_key,
        "--enable-crds", "Logs",
        *(arg for config in (*configs, any_pod) for arg in ("--config", config)),
    ]  # fmt: skip


def _leaving_test_pods(stage: Path, directory: Path, node_side_gate: bool) -> Path:
    """KWOK's pod-ready stage, but for pods annotated LIFECYCLE_BY_TEST (and, with
    `node_side_gate`, for pods waiting for a kubelet's admission)."""
    ready = yaml.safe_load(stage.read_text())
    expressions = ready["spec"]["selector"]["matchExpressions"]
    expressions.append(
        {"key": f'.metadata.annotations["{LIFECYCLE_BY_TEST}"]', "operator": "DoesNotExist"}
    )
    if node_side_gate:
        expressions.append({"key": _WAITING_FOR_ADMISSION, "operator": "DoesNotExist"})
    derived = directory / stage.name
    derived.write_text(yaml.safe_dump(ready, sort_keys=False))
    return derived


def with_kubelet(node: dict[str, Any], address: str, port: int) -> dict[str, Any]:
    """`node` (an object to create) with KWOK's server at `address:port` as its kubelet: its
    InternalIP and kubelet port, which the API server dials for `kubectl logs` on its pods."""
    status = node.setdefault("status", {})
    others = [a for a in status.get("addresses") or [] if a.get("type") != "InternalIP"]
    status["addresses"] = [{"type": "InternalIP", "address": address}, *others]
    status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": port}}
    return node
