"""The admission of pods on nodes that no test simulates the kubelet of, on a gated plane.

On a plane started with `node_side_gate` (plane.py; the gate is kwok.py's), KWOK holds a pod
that asks for an extended resource, or uses ResourceClaims, in Pending until it is annotated
ADMITTED. A node annotated NODE_SIDE_KUBELET has a kubelet stand-in that admits its pods
itself (tests/kit/node/admission.py); a node made bare (a control-plane test's, with its
capacity written by hand) has nobody to ask, so `Admitter` admits such a pod as soon as it is
bound there, as the bare plane always did. Owns `Admitter`. Must not know anything about GPUs,
or admit a pod on a NODE_SIDE_KUBELET node.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.kit.kube import ApiError
from tests.kit.plane.kwok import ADMITTED, NODE_SIDE_KUBELET
from tests.kit.plane.store import ApiStore

Obj = dict[str, Any]


class Admitter:
    """Watches pods; admits those bound to a node without a kubelet stand-in. Lives as long as
    its plane (its threads are named `plane-admitter-…`)."""

    def __init__(self, url: str, token: str, ca: Path) -> None:
        self.store = ApiStore(url, token, ca, thread_prefix="plane-admitter")

    def start(self) -> Admitter:
        self.store.subscribe(self._changed)
        self.store.watch(["pods"])
        return self

    def stop(self) -> None:
        self.store.close()

    def _changed(self, kind: str, key: Any, obj: Obj) -> None:
        if kind == "DELETED" or obj.get("kind") != "Pod" or not _waiting(obj):
            return
        try:
            node = self.store.get("nodes", obj["spec"]["nodeName"])
        except ApiError:
            return  # a pod bound to no node that exists: no kubelet will ever start it
        if NODE_SIDE_KUBELET in (node["metadata"].get("annotations") or {}):
            return
        meta = obj["metadata"]
        body = {"metadata": {"annotations": {ADMITTED: "true"}}}
        try:
            self.store.patch("pods", meta["name"], body, namespace=meta["namespace"])
        except ApiError:
            pass  # gone meanwhile


def _waiting(pod: Obj) -> bool:
    """Bound, Pending, not admitted, and asking for an extended resource or using claims."""
    if not (pod.get("spec") or {}).get("nodeName"):
        return False
    if ADMITTED in (pod["metadata"].get("annotations") or {}):
        return False
    if ((pod.get("status") or {}).get("phase") or "Pending") != "Pending":
        return False
    spec = pod.get("spec") or {}
    if spec.get("resourceClaims"):
        return True
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        resources = container.get("resources") or {}
        for name in (*(resources.get("limits") or {}), *(resources.get("requests") or {})):
            if "/" in name and not name.startswith("kubernetes.io/"):
                return True
    return False
