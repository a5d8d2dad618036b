"""One real control plane per test session (per pytest-xdist worker: its own ports, directory
and keeper), handed clean to each `SimCluster` that asks for it.

Owns starting it once (lazily: tests without a cluster never start it), its baseline (every
object the plane made for itself before the first test: system namespaces, ServiceAccounts, RBAC
bootstrap roles, leases ...), and `reset()`, which removes everything else a test left (nodes,
namespaces and their contents, cluster-scoped RBAC, CRDs, admission policies, DaemonSets in
`kube-system` ...) and waits until the controllers have finished deleting, so that the next test
sees a plane as new. Must not know about GPUs; stops the plane at interpreter exit.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator
from typing import Any

from tests.kit.kube import ApiError
from tests.kit.plane import ControlPlane, netns
from tests.kit.plane.admitter import Admitter
from tests.kit.plane.plane import wait_for
from tests.kit.plane.store import ApiStore

Obj = dict[str, Any]
_lock = threading.Lock()
_plane: ControlPlane | None = None
_api: ApiStore | None = None
_baseline: set[tuple[str, str, str, str]] = set()
_baseline_namespaces: set[str] = set()  # where leases, endpoints ... are the server's own
# Remade by the server as fast as they are removed: left alone in the namespaces the plane
# made for itself (kube-node-lease, kube-system, default), removed with the rest from those a
# test made. Events are removed: one a test left about its pod `train` would mislead the next
# test's doctor.
_SKIP = {"leases", "endpoints", "endpointslices"}
# CRDs every simulated cluster installs with the same definition (see `keep_crds`): kept
# between tests, their objects removed.
_kept_crds: set[str] = set()
_CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def plane() -> ControlPlane:
    """The session's plane, started on first use."""
    global _plane, _api
    with _lock:
        if _plane is None:
            started = ControlPlane(
                kubelet_addresses=netns.certified_addresses(), node_side_gate=True
            ).start()
            atexit.register(started.stop)
            assert started.creds is not None
            _api = ApiStore(started.url, started.creds.admin_token, started.creds.ca_cert)
            # pods on nodes made bare (no kubelet stand-in) are admitted at once
            admitter = Admitter(started.url, started.creds.admin_token, started.creds.ca_cert)
            atexit.register(admitter.start().stop)
            atexit.register(_api.close)  # runs first: atexit is last in, first out
            _wait_for_namespace_controllers(_api)
            _baseline.update(_inventory(_api))
            _baseline_namespaces.update(n for p, _, n, _ in _baseline if p == "/api/v1/namespaces")
            _plane = started
        return _plane


def _wait_for_namespace_controllers(cp: ApiStore) -> None:
    """The baseline is taken once the controllers have made what they keep in every namespace
    (the root CA's ConfigMap, the `default` ServiceAccount): made later, it would be a test's
    leftover, which they remake as fast as `reset` deletes it."""

    def done() -> bool:
        for namespace in cp.list("namespaces"):
            name = namespace["metadata"]["name"]
            for resource, made in (
                ("configmaps", "kube-root-ca.crt"),
                ("serviceaccounts", "default"),
            ):
                if not any(o["metadata"]["name"] == made for o in cp.list(resource, name)):
                    return False
        return True

    wait_for("the controllers' objects in every namespace", done)


def keep_crds(names: Iterable[str]) -> None:
    """Let `reset` keep these CRDs (their custom objects still go): a cluster that installs
    one the same way as the last then finds it served at once, where a new CRD takes the
    server about a second before its first object can be created, and another to delete.
    A test that deletes or edits one does so on its own cluster; the next creates it anew."""
    with _lock:
        _kept_crds.update(names)


def _collections(cp: ApiStore) -> list[tuple[str, bool]]:
    """(path of every listable and deletable resource, namespaced), preferred versions."""
    found = []
    groups = [("", "/api/v1")]
    for group in cp.request("GET", "/apis").get("groups") or []:
        preferred = group["preferredVersion"]["version"]
        groups.append((group["name"], f"/apis/{group['name']}/{preferred}"))
    for _, base in groups:
        try:
            resources = cp.request("GET", base).get("resources") or []
        except ApiError:  # a group vanishing with its CRD
            continue
        for r in resources:
            verbs = set(r.get("verbs") or [])
            if "/" in r["name"] or not {"list", "delete"} <= verbs:
                continue
            found.append((f"{base}/{r['name']}", bool(r["namespaced"])))
    return found


def _inventory(cp: ApiStore) -> set[tuple[str, str, str, str]]:
    items = set()
    for path, _ in _collections(cp):
        for obj in _list(cp, path):
            meta = obj["metadata"]
            items.add((path, str(meta.get("namespace") or ""), meta["name"], meta["uid"]))
    return items


def _list(cp: ApiStore, path: str) -> list[Obj]:
    try:
        return list(cp.request("GET", path).get("items") or [])
    except ApiError:  # a CRD deleted meanwhile
        return []


def _object_path(path: str, namespaced: bool, meta: Obj) -> str:
    prefix, _, plural = path.rpartition("/")
    name = urllib.parse.quote(meta["name"])
    if namespaced:
        return f"{prefix}/namespaces/{urllib.parse.quote(meta['namespace'])}/{plural}/{name}"
    return f"{path}/{name}"


def reset(timeout: float = 90.0) -> None:
    """Delete what is not in the baseline, until nothing is left (controllers may remake
    pods while their DaemonSet goes).

    A namespace goes first: once it is being deleted the server admits nothing new in it, so
    what controllers make in every namespace (its ServiceAccount, `kube-root-ca.crt`, a
    DaemonSet's pods) stays gone; then the controllers that would remake pods; then the rest.
    A namespace found empty is finalized here rather than left to the namespace controller,
    which takes about 4 s to notice what it no longer has to delete (most of a reset).

    A pass reads every collection; the passes between read only those that still held
    something (and the namespaces), until they are empty or all that was left were namespaces
    it finalized; the reset ends with a full pass that finds nothing. The deletes of a pass go
    side by side, in two waves (`_FIRST`, then the rest)."""
    plane()
    cp = _api
    assert cp is not None
    deadline = time.monotonic() + timeout
    every = sorted(_collections(cp), key=_deletion_order)  # a CRD's goes with it
    collections = every
    while True:
        left: list[str] = []
        occupied: set[str] = set()
        emptying: list[Obj] = []
        waves: tuple[list[tuple[str, bool, Obj]], list[tuple[str, bool, Obj]]] = ([], [])
        for path, namespaced, obj in _leftovers(cp, collections):
            meta = obj["metadata"]
            namespace = str(meta.get("namespace") or "")
            left.append(f"{path} {namespace}/{meta['name']}".replace(" /", " "))
            occupied.add(namespace)
            if path.endswith("/namespaces") and meta.get("deletionTimestamp"):
                emptying.append(obj)
                continue
            waves[_deletion_order((path, namespaced)) == len(_FIRST)].append(
                (path, namespaced, obj)
            )
        for wave in waves:
            list(_readers().map(lambda found: _delete(cp, *found), wave))
        finalized = [e for e in emptying if e["metadata"]["name"] not in occupied]
        for emptied in finalized:
            _finalize(cp, emptied)
        if not left and collections is every:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{len(left)} objects a test left were still there after {timeout} s: "
                + ", ".join(left[:10])
            )
        dirty = {line.split(" ", 1)[0] for line in left}
        collections = [c for c in every if c[0] in dirty or c[0].endswith("/namespaces")]
        if len(finalized) == len(left):  # all that was left is gone now: the last pass
            collections = every
        else:
            time.sleep(0.1)


def _delete(cp: ApiStore, path: str, namespaced: bool, obj: Obj) -> None:
    meta = obj["metadata"]
    if not path.endswith("/namespaces") and meta.get("finalizers"):
        # nothing runs here that would remove a finalizer a test put on. A ResourceClaim
        # refuses the patch (422, "spec: field is immutable"); its delete-protection
        # finalizer is the resourceclaim controller's, which lifts it once its pods go.
        _quietly(
            cp.request, "PATCH", _object_path(path, namespaced, meta),
            {"metadata": {"finalizers": None}}, "application/merge-patch+json",
            also_ignored=(422,),
        )  # fmt: skip
    _quietly(cp.request, "DELETE", _object_path(path, namespaced, meta) + "?gracePeriodSeconds=0")


def _leftovers(
    cp: ApiStore, collections: list[tuple[str, bool]]
) -> Iterator[tuple[str, bool, Obj]]:
    """(collection, namespaced, object) of each object not in the baseline, in the order of
    `collections`. The collections are read side by side: one after another, the sixty-odd
    reads of a pass were most of a test's reset."""
    listed = _readers().map(lambda c: _list(cp, c[0]), collections)
    for (path, namespaced), objects in zip(collections, listed, strict=True):
        for obj in objects:
            meta = obj["metadata"]
            namespace = str(meta.get("namespace") or "")
            if (path, namespace, meta["name"], meta["uid"]) in _baseline:
                continue
            if path.rpartition("/")[2] in _SKIP and namespace in _baseline_namespaces:
                continue
            if _kept(path, meta["name"]):
                continue
            yield path, namespaced, obj


def _kept(path: str, name: str) -> bool:
    """A kept CRD, or the APIService the server registered for its group (`v1.nvidia.com`)."""
    if path == _CRDS:
        return name in _kept_crds
    if path.endswith("/apiservices"):
        return name.partition(".")[2] in {c.partition(".")[2] for c in _kept_crds}
    return False


_pool: concurrent.futures.ThreadPoolExecutor | None = None


def _readers() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(8, thread_name_prefix="plane-reset")
        return _pool


# What `reset` deletes first: namespaces, then what makes pods, then everything else.
_FIRST = ("namespaces", "daemonsets", "deployments", "statefulsets", "cronjobs", "jobs",
          "replicasets", "replicationcontrollers")  # fmt: skip


def _deletion_order(collection: tuple[str, bool]) -> int:
    plural = collection[0].rpartition("/")[2]
    return _FIRST.index(plural) if plural in _FIRST else len(_FIRST)


def _finalize(cp: ApiStore, namespace: Obj) -> None:
    """Remove a deleted, empty namespace now (what the namespace controller does last)."""
    name = urllib.parse.quote(namespace["metadata"]["name"])
    body = {**namespace, "apiVersion": "v1", "kind": "Namespace"}
    body["spec"] = {**(namespace.get("spec") or {}), "finalizers": []}
    _quietly(cp.request, "PUT", f"/api/v1/namespaces/{name}/finalize", body)


def _quietly(call: Any, *args: Any, also_ignored: tuple[int, ...] = ()) -> None:
    try:
        call(*args)
    except ApiError as exc:
        if exc.code not in (404, 409, *also_ignored):  # gone already, or changed meanwhile
            raise


def leftovers() -> list[str]:
    """What `reset` would delete now ("collection namespace/name"): for the kit's own tests."""
    plane()
    assert _api is not None
    found = _leftovers(_api, sorted(_collections(_api), key=_deletion_order))
    return [f"{path} {obj['metadata'].get('namespace') or ''}/{obj['metadata']['name']}"
            for path, _, obj in found]  # fmt: skip
