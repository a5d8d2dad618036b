"""A DaemonSet controller: one pod per eligible node, rolling updates, truthful status.

Stand-in backend only (unit-level tests, fault injection): on `backend="real"` Kubernetes'
own controller does this.

Owns, per DaemonSet: which nodes should run a pod (nodeSelector, required node affinity, and the
node's NoSchedule/NoExecute taints against the template's tolerations plus the ones the real
controller adds), creating `<ds>-<5 chars>` pods bound to their node (ownerReference with
controller: true, template labels plus `controller-revision-hash` and `pod-template-generation`),
ControllerRevisions, recreating deleted or failed pods, removing pods from nodes that stop
matching, replacing pods after a template change (`kubectl rollout restart`) no more than
`maxUnavailable` nodes at a time (default 1; the next only once the new pod is Ready; OnDelete
waits for deletes), deleting a deleted DaemonSet's pods and revisions (the garbage collector's
part), and
`status`. Must not start pods (podlifecycle.py does).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Hashable, Iterable
from typing import Any

from tests.fakes.apiserver import ApiError, Store
from tests.fakes.apiserver.selectors import parse_labels
from tests.fakes.apiserver.store import ListQuery
from tests.fakes.cluster.loop import Change
from tests.fakes.cluster.matching import (
    is_ready,
    is_terminal,
    labels_of,
    selector_matches,
    untolerated_taint,
)

Obj = dict[str, Any]
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery rand.SafeEncodeString
# Tolerations the DaemonSet controller adds to its pods (util.AddOrUpdateDaemonPodTolerations).
DEFAULT_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)


def template_hash(template: Obj) -> str:
    """controller-revision-hash: FNV-32a of the template, safe-encoded like ComputeHash."""
    value = 0x811C9DC5
    for byte in json.dumps(template, sort_keys=True).encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_ALPHANUMS[ord(c) % len(_ALPHANUMS)] for c in str(value))


def _owner_uid(pod: Obj) -> str:
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == "DaemonSet" and ref.get("controller"):
            return str(ref.get("uid"))
    return ""


def _owner_name(pod: Obj) -> str:
    refs = pod["metadata"].get("ownerReferences") or []
    return next((str(r["name"]) for r in refs if r.get("kind") == "DaemonSet"), "")


def should_run(ds: Obj, node: Obj) -> bool:
    spec = ds["spec"]["template"].get("spec") or {}
    tolerations = list(spec.get("tolerations") or []) + list(DEFAULT_TOLERATIONS)
    return selector_matches(node, spec) and untolerated_taint(node, tolerations) is None


class DaemonSetController:
    name = "daemonsets"

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._nodes: dict[str, str] = {}  # what placement depends on, per node
        self._pods = store.registry.lookup("pods")

    def keys_for(self, change: Change) -> Iterable[Hashable]:
        if change.resource == "daemonsets":
            return [(change.namespace, change.name)]
        if change.resource == "pods":
            owner = _owner_name(change.obj)
            return [(change.namespace, owner)] if owner else []
        if change.resource == "nodes":
            return [("*",)] if self._placement_changed(change) else []
        return []

    def _placement_changed(self, change: Change) -> bool:
        """Only labels, taints and existence move daemon pods; status updates do not."""
        spec = change.obj.get("spec") or {}
        seen = json.dumps([labels_of(change.obj), spec.get("taints"), spec.get("unschedulable")])
        with self._lock:
            if change.type == "DELETED":
                self._nodes.pop(change.name, None)
                return True
            if self._nodes.get(change.name) == seen:
                return False
            self._nodes[change.name] = seen
            return True

    def reconcile(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        if key == ("*",):
            for ds in self.store.list("daemonsets"):
                self._sync(ds)
            return
        try:
            ds = self.store.get("daemonsets", key[1], key[0])
        except ApiError:
            self._orphans(key[0], key[1])
            return
        self._sync(ds)

    def _owned(self, ds: Obj) -> list[Obj]:
        """The DaemonSet's pods (its matchLabels narrow the list before any copy is made)."""
        meta = ds["metadata"]
        selector = ((ds.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        query = ListQuery(parse_labels(",".join(f"{k}={v}" for k, v in sorted(selector.items()))))
        # Shared read-only revisions, not copies: this runs after every pod change (hot path).
        found = self.store.query(self._pods, meta["namespace"], query).items
        return [r.obj for r in found if _owner_uid(r.obj) == meta["uid"]]

    def _orphans(self, namespace: str, name: str) -> None:
        for pod in self.store.list("pods", namespace):
            if _owner_name(pod) == name and pod["metadata"].get("ownerReferences"):
                self._delete(pod)
        # the garbage collector takes its ControllerRevisions too: a DaemonSet created again
        # under the same name (and template) names its first revision the same
        for revision in self.store.list("controllerrevisions", namespace):
            if _owner_name(revision) == name:
                try:
                    self.store.delete(
                        "controllerrevisions", revision["metadata"]["name"], namespace
                    )
                except ApiError:
                    pass  # gone meanwhile

    # ---- one DaemonSet ------------------------------------------------------------------

    def _sync(self, ds: Obj) -> None:
        meta = ds["metadata"]
        if meta.get("deletionTimestamp"):
            return
        current = template_hash(ds["spec"]["template"])
        self._revision(ds, current)
        nodes = {n["metadata"]["name"]: n for n in self.store.list("nodes")}
        pods: dict[str, list[Obj]] = {}
        for pod in self._owned(ds):
            pods.setdefault(str(pod["spec"].get("nodeName") or ""), []).append(pod)
        wanted = sorted(n for n, node in nodes.items() if should_run(ds, node))
        for name in set(pods) - set(wanted):
            for pod in pods[name]:
                self._delete(pod)  # the node stopped matching, or is gone
        for name in wanted:
            self._one_per_node(ds, nodes[name], pods.get(name, []), current)
        self._roll(ds, wanted, pods, current)
        self._status(ds, wanted, current)

    def _one_per_node(self, ds: Obj, node: Obj, pods: list[Obj], current: str) -> None:
        live = []
        for pod in pods:
            if is_terminal(pod):
                self._delete(pod)  # a failed daemon pod is replaced
            else:
                live.append(pod)
        if not live:
            self._create(ds, node, current)
            return
        live.sort(key=lambda p: (_hash_of(p) != current, p["metadata"]["creationTimestamp"]))
        for extra in live[1:]:
            self._delete(extra)

    def _roll(self, ds: Obj, wanted: list[str], pods: dict[str, list[Obj]], current: str) -> None:
        strategy = ds["spec"].get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate":
            return
        budget = _max_unavailable(strategy, len(wanted))
        unavailable = 0
        old_ready: list[Obj] = []
        for name in wanted:
            live = [p for p in pods.get(name, []) if not is_terminal(p)]
            pod = live[0] if live else None
            if pod is None or not is_ready(pod):
                unavailable += 1
                if pod is not None and _hash_of(pod) != current:
                    self._delete(pod)  # an old pod that is not ready anyway goes at once
            elif _hash_of(pod) != current:
                old_ready.append(pod)
        for pod in old_ready[: max(0, budget - unavailable)]:
            self._delete(pod)

    # ---- writes -----------------------------------------------------------------------

    def _create(self, ds: Obj, node: Obj, current: str) -> None:
        meta, template = ds["metadata"], ds["spec"]["template"]
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        labels["controller-revision-hash"] = current
        labels["pod-template-generation"] = str(meta.get("generation", 1))
        pod_meta: Obj = {
            "generateName": f"{meta['name']}-",
            "namespace": meta["namespace"],
            "labels": labels,
            "ownerReferences": [_owner(ds)],
        }
        annotations = (template.get("metadata") or {}).get("annotations")
        if annotations:
            pod_meta["annotations"] = dict(annotations)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": pod_meta,
            "spec": _pod_spec(template.get("spec") or {}, str(node["metadata"]["name"])),
            "status": {"phase": "Pending", "qosClass": "BestEffort"},
        }
        self.store.create(pod)

    def _delete(self, pod: Obj) -> None:
        try:
            self.store.delete("pods", pod["metadata"]["name"], pod["metadata"]["namespace"])
        except ApiError:
            pass  # already gone

    def _revision(self, ds: Obj, current: str) -> None:
        """A ControllerRevision per template (what `kubectl rollout history` lists)."""
        meta = ds["metadata"]
        name = f"{meta['name']}-{current}"
        existing = [
            r
            for r in self.store.list("controllerrevisions", meta["namespace"])
            if any(o.get("uid") == meta["uid"] for o in r["metadata"].get("ownerReferences") or [])
        ]
        if any(r["metadata"]["name"] == name for r in existing):
            return
        labels = dict((ds["spec"]["template"].get("metadata") or {}).get("labels") or {})
        labels["controller-revision-hash"] = current
        self.store.create(
            {
                "apiVersion": "apps/v1",
                "kind": "ControllerRevision",
                "metadata": {
                    "name": name,
                    "namespace": meta["namespace"],
                    "labels": labels,
                    "ownerReferences": [_owner(ds)],
                },
                "data": {"spec": {"template": {**ds["spec"]["template"], "$patch": "replace"}}},
                "revision": 1 + max((int(r.get("revision") or 0) for r in existing), default=0),
            }
        )

    def _status(self, ds: Obj, wanted: list[str], current: str) -> None:
        meta = ds["metadata"]
        pods = [p for p in self._owned(ds) if not is_terminal(p)]
        on_wanted = [p for p in pods if p["spec"].get("nodeName") in wanted]
        scheduled = {p["spec"].get("nodeName") for p in on_wanted}
        ready = [p for p in on_wanted if is_ready(p)]
        status = {
            "currentNumberScheduled": len(scheduled),
            "numberMisscheduled": len({p["spec"].get("nodeName") for p in pods} - set(wanted)),
            "desiredNumberScheduled": len(wanted),
            "numberReady": len(ready),
            "observedGeneration": meta.get("generation", 1),
            "updatedNumberScheduled": len(
                {p["spec"]["nodeName"] for p in on_wanted if _hash_of(p) == current}
            ),
            "numberAvailable": len(ready),
            "numberUnavailable": len(wanted) - len(ready),
        }
        if {k: v for k, v in (ds.get("status") or {}).items() if k in status} != status:
            self.store.patch(
                "daemonsets",
                meta["name"],
                {"status": status},
                namespace=meta["namespace"],
                status=True,
            )


def _owner(ds: Obj) -> Obj:
    meta = ds["metadata"]
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _pod_spec(template_spec: Obj, node_name: str) -> Obj:
    """The template's spec as the controller sends it: bound, pinned, with its tolerations."""
    spec: Obj = json.loads(json.dumps(template_spec))
    held = spec.setdefault("tolerations", [])
    held += [dict(t) for t in DEFAULT_TOLERATIONS if t not in held]
    affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    # Pinned with a matchFields term, as ReplaceDaemonSetPodNodeNameNodeAffinity does.
    pin = {"key": "metadata.name", "operator": "In", "values": [node_name]}
    affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": [{"matchFields": [pin]}]
    }
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec["nodeName"] = node_name
    return spec


def _hash_of(pod: Obj) -> str:
    return str((pod["metadata"].get("labels") or {}).get("controller-revision-hash", ""))


def _max_unavailable(strategy: Obj, desired: int) -> int:
    value = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", 1)
    if isinstance(value, str) and value.endswith("%"):
        scaled = math.ceil(desired * int(value[:-1]) / 100)  # rounded up, like the controller
    else:
        scaled = int(value)
    return max(scaled, 1)
