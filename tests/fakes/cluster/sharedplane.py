"""One real control plane per test session, handed clean to each `SimCluster` that asks for it.

Owns starting it once (lazily: stand-in tests never start it), its baseline (every object the
plane made for itself before the first test: system namespaces, ServiceAccounts, RBAC
bootstrap roles, leases ...), and `reset()`, which removes everything else a test left (nodes,
namespaces and their contents, cluster-scoped RBAC, CRDs, admission policies, DaemonSets in
`kube-system` ...) and waits until the controllers have finished deleting, so that the next test
sees a plane as new. Must not know about GPUs; stops the plane at interpreter exit.
"""

from __future__ import annotations

import atexit
import threading
import time
import urllib.parse
from typing import Any

from tests.controlplane import ControlPlane
from tests.controlplane.store import ApiStore
from tests.fakes.apiserver import ApiError

Obj = dict[str, Any]
_lock = threading.Lock()
_plane: ControlPlane | None = None
_api: ApiStore | None = None
_baseline: set[tuple[str, str, str, str]] = set()
# Not objects a test makes, or remade by the server as fast as they are removed. Events are
# removed: one a test left about its pod `train` would mislead the next test's doctor.
_SKIP = {"leases", "endpoints", "endpointslices", "componentstatuses", "bindings"}


def plane() -> ControlPlane:
    """The session's plane, started on first use."""
    global _plane, _api
    with _lock:
        if _plane is None:
            started = ControlPlane().start()
            atexit.register(started.stop)
            assert started.creds is not None
            _api = ApiStore(started.url, started.creds.admin_token, started.creds.ca_cert)
            atexit.register(_api.close)  # runs first: atexit is last in, first out
            _baseline.update(_inventory(_api))
            _plane = started
        return _plane


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
            if "/" in r["name"] or r["name"] in _SKIP or not {"list", "delete"} <= verbs:
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
    pods while their DaemonSet goes)."""
    plane()
    cp = _api
    assert cp is not None
    deadline = time.monotonic() + timeout
    while True:
        left = 0
        for path, namespaced in _collections(cp):
            for obj in _list(cp, path):
                meta = obj["metadata"]
                key = (path, str(meta.get("namespace") or ""), meta["name"], meta["uid"])
                if key in _baseline:
                    continue
                left += 1
                if meta.get("deletionTimestamp") and path.endswith("/namespaces"):
                    continue  # the namespace controller is on it
                target = _object_path(path, namespaced, meta)
                if meta.get("finalizers") and not path.endswith("/namespaces"):
                    # nothing runs here that would remove a finalizer a test put on
                    _quietly(
                        cp.request, "PATCH", target, {"metadata": {"finalizers": None}},
                        "application/merge-patch+json",
                    )  # fmt: skip
                _quietly(cp.request, "DELETE", target + "?gracePeriodSeconds=0")
        if not left:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{left} objects a test left were still there after {timeout} s")
        time.sleep(0.3)


def _quietly(call: Any, *args: Any) -> None:
    try:
        call(*args)
    except ApiError as exc:
        if exc.code not in (404, 409):  # gone already, or changed meanwhile: next pass
            raise
