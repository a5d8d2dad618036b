"""The kubelet stand-in's admission gate: a pod on a simulated node runs only once admitted.

On a node whose kubelet is simulated (annotated NODE_SIDE_KUBELET, tests/kit/plane/kwok.py),
KWOK holds a pod that asks for an extended resource in Pending until the pod carries ADMITTED;
the kubelet stand-in (podlifecycle.py) sets it with `admitted` once the pod's device-plugin
Allocate calls succeeded, as a kubelet starts a pod's containers only after admission. A pod
that uses ResourceClaims is held the same way until its DRA kubelet plugin's
NodePrepareResources succeeded: the node's DRA side (tests/kit/node/draplugin.py) admits it
then, not the device-plugin side (`prepared_by_dra`). Owns `awaits_admission`,
`prepared_by_dra`, `admitted` and `not_prepared`. Must not decide admission (allocation.py, the
device plugins and the DRA drivers do).
"""

from __future__ import annotations

from typing import Any

from tests.kit.kube import ApiError
from tests.kit.node import events, podstatus
from tests.kit.plane.kwok import ADMITTED
from tests.kit.plane.store import ApiStore

Obj = dict[str, Any]


def awaits_admission(pod: Obj) -> bool:
    """Whether KWOK holds `pod` in Pending until this kubelet admits it: it asks for an extended
    resource, is not admitted yet, and is not past Pending (tests/kit/plane/kwok.py gates
    the pod-ready stage of nodes with a kubelet stand-in on ADMITTED)."""
    notes = pod["metadata"].get("annotations") or {}
    phase = (pod.get("status") or {}).get("phase") or ""
    if ADMITTED in notes or phase not in ("", "Pending"):
        return False
    spec = pod.get("spec") or {}
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        resources = container.get("resources") or {}
        for name in (*(resources.get("limits") or {}), *(resources.get("requests") or {})):
            if "/" in name and not name.startswith("kubernetes.io/"):
                return True
    return False


def prepared_by_dra(pod: Obj) -> bool:
    """Whether `pod` uses ResourceClaims: KWOK holds it until its claims were prepared
    (tests/kit/plane/kwok.py), so only the node's DRA side may admit it."""
    return bool((pod.get("spec") or {}).get("resourceClaims"))


def admitted(store: ApiStore, pod: Obj) -> None:
    """The gate: this kubelet admitted `pod` (its device plugins' Allocate succeeded; a DRA
    kubelet plugin's NodePrepareResources, where it has claims), so KWOK may start its
    containers. Call it only after every allocation and preparation succeeded; a pod rejected
    instead goes Failed (podstatus.rejected) and is never started."""
    meta = pod["metadata"]
    body = {"metadata": {"annotations": {ADMITTED: "true"}}}
    try:
        store.patch("pods", meta["name"], body, namespace=meta["namespace"])
    except ApiError:
        pass  # the pod is gone


# k8s.io/kubernetes v1.37: the event (pkg/kubelet/kuberuntime) and the error it wraps
# (pkg/kubelet/cm/dra's PrepareResources)
PREPARE_FAILED = "FailedPrepareDynamicResources"
_PREPARE_FAILED_MESSAGE = "Failed to prepare dynamic resources: prepare dynamic resources: {}"


def not_prepared(store: ApiStore, pod: Obj, node: str, error: str) -> None:
    """What a kubelet shows when a DRA driver refused NodePrepareResources for `pod` (`error`
    in the kubelet's words, e.g. `NodePrepareResources failed for ResourceClaim <name>: …`):
    the pod's sandbox is not created, so it stays Pending with its containers
    ContainerCreating, and a Warning event says why (repeated at each retry)."""
    message = _PREPARE_FAILED_MESSAGE.format(error)
    events.record(store, pod, PREPARE_FAILED, message, events.Source("kubelet", node))
    try:
        host = store.get("nodes", node)
    except ApiError:
        return
    addresses = (host.get("status") or {}).get("addresses") or []
    ip = next((str(a["address"]) for a in addresses if a.get("type") == "InternalIP"), "")
    since = str((pod.get("status") or {}).get("startTime") or podstatus.now())
    status = podstatus.creating(pod, ip, since)
    if (pod.get("status") or {}).get("containerStatuses") == status["containerStatuses"]:
        return
    meta = pod["metadata"]
    try:
        store.patch("pods", meta["name"], {"status": status}, namespace=meta["namespace"],
                    status=True)  # fmt: skip
    except ApiError:
        pass  # the pod is gone
