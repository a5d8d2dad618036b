"""What a simulated cluster uses of its control plane, and what it watches there.

Owns `plane_of` (the session's plane, or one of the cluster's own with KWOK's certified node
addresses and the node-side gate), `admitter_of` (admits the pods of nodes without a kubelet
stand-in on a plane of the cluster's own), `log_files_of` and `store_of` (the container logs
KWOK serves and the administrator's store), `WATCHED`/`WATCHED_CRDS` (what the node side reacts
to), `CrdWatch` (watch a custom resource once its CRD is served), `create` and
`ensure_namespace` (a layout's objects, each once its CRD is served) and `started_by_node` (a
DaemonSet whose pods the node side starts instead of KWOK). Must not start anything of the
node side.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.kit.kube import ApiError
from tests.kit.plane.kwok import LIFECYCLE_BY_TEST
from tests.kit.plane.netns import certified_addresses

if TYPE_CHECKING:
    from tests.kit.plane import ControlPlane
    from tests.kit.plane.admitter import Admitter
    from tests.kit.plane.containerlogs import LogStore
    from tests.kit.plane.store import ApiStore

# What the node side reacts to (and, on a real server, watches).
WATCHED = ("nodes", "pods", "configmaps", "daemonsets", "customresourcedefinitions")
WATCHED_CRDS = ("clusterpolicies.nvidia.com",)
Obj = dict[str, Any]


def plane_of(plane: ControlPlane | None) -> tuple[ControlPlane, bool]:
    """`plane`, or a started plane of the cluster's own; and whether it is the cluster's own."""
    from tests.kit.plane import ControlPlane

    if plane is not None:
        return plane, False
    return ControlPlane(kubelet_addresses=certified_addresses(), node_side_gate=True).start(), True


def admitter_of(plane: ControlPlane) -> Admitter:
    """Admits at once the pods of nodes without a kubelet stand-in (DRA nodes) on a plane of
    the cluster's own."""
    from tests.kit.plane.admitter import Admitter

    assert plane.creds is not None
    return Admitter(plane.url, plane.creds.admin_token, plane.creds.ca_cert).start()


def log_files_of(plane: ControlPlane, directory: Path) -> LogStore:
    from tests.kit.plane.containerlogs import ContainerLogFiles

    return ContainerLogFiles(plane, directory)


def store_of(plane: ControlPlane) -> ApiStore:
    from tests.kit.plane.store import ApiStore

    assert plane.creds is not None
    return ApiStore(plane.url, plane.creds.admin_token, plane.creds.ca_cert)


class CrdWatch:
    """A CRD we react to appeared: start watching its objects."""

    name = "crd-watch"

    def __init__(self, store: ApiStore) -> None:
        self.store = store

    def keys_for(self, change: Any) -> list[str]:
        if change.resource == "customresourcedefinitions" and change.type != "DELETED":
            return [change.name] if change.name in WATCHED_CRDS else []
        return []

    def reconcile(self, key: object) -> None:
        for _ in range(50):  # the CRD is served a moment after it is created
            if self.store.watching(str(key)):
                return
            self.store.watch([str(key)])
            time.sleep(0.1)


def create(store: ApiStore, obj: Obj, timeout: float = 20.0) -> None:
    """Create; on a real server a custom resource waits until its new CRD is served. A CRD
    already there is one the shared plane kept from an earlier cluster (sharedplane.keep_crds)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            store.create(obj)
            return
        except ApiError as exc:
            if exc.code == 409 and obj.get("kind") == "CustomResourceDefinition":
                return
            if exc.code not in (400, 404) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def ensure_namespace(store: ApiStore, name: str) -> None:
    try:
        store.get("namespaces", name)
    except ApiError:
        create(store, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def started_by_node(obj: Obj, owns: Callable[[Obj], bool]) -> Obj:
    """`obj`, or a DaemonSet whose pods run a simulated program (`owns` its pod template)
    marked for the node side to start (see LIFECYCLE_BY_TEST)."""
    if obj.get("kind") != "DaemonSet":
        return obj
    template = obj["spec"]["template"]
    if not owns(template):
        return obj
    marked = copy.deepcopy(obj)
    notes = marked["spec"]["template"].setdefault("metadata", {}).setdefault("annotations", {})
    notes[LIFECYCLE_BY_TEST] = "true"
    return marked
