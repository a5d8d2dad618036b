"""The kubelet stand-in's admission gate: a pod on a simulated node runs only once admitted.

On a node whose kubelet is simulated (annotated NODE_SIDE_KUBELET, tests/controlplane/plane.py),
KWOK holds a pod that asks for an extended resource in Pending until the pod carries ADMITTED;
the kubelet stand-in (podlifecycle.py) sets it with `admitted` once the pod's device-plugin
Allocate calls succeeded, as a kubelet starts a pod's containers only after admission. A DRA
kubelet plugin's NodePrepareResources is the same kind of step: call `admitted` after it too.
Owns `awaits_admission` and `admitted`. Must not decide admission (allocation.py and the device
plugins do).
"""

from __future__ import annotations

from typing import Any

from tests.controlplane.plane import ADMITTED
from tests.controlplane.store import ApiStore
from tests.kube import ApiError

Obj = dict[str, Any]


def awaits_admission(pod: Obj) -> bool:
    """Whether KWOK holds `pod` in Pending until this kubelet admits it: it asks for an extended
    resource, is not admitted yet, and is not past Pending (tests/controlplane/plane.py gates
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
