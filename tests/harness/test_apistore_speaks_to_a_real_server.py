"""`ApiStore` gives the simulated node side the stand-in `ApiStore`'s API on a real kube-apiserver:
names resolved by discovery (short names, CRDs), the three patch types, status subresources,
failures as the same `ApiError` (code, reason) the stand-in raises, and a change feed from the
server's watches that resumes and reports deletions."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.kit.kube import ApiError
from tests.kit.kube.objects import cluster_policy_crd, node, pod
from tests.kit.plane import sharedplane
from tests.kit.plane.store import ApiStore

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def store() -> Iterator[ApiStore]:
    plane = sharedplane.plane()
    assert plane.creds is not None
    api = ApiStore(plane.url, plane.creds.admin_token, plane.creds.ca_cert)
    try:
        yield api
    finally:
        api.close()
        sharedplane.reset()


def test_crud_by_short_names_and_patch_types(store: ApiStore) -> None:
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t-crud"}})
    store.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "t-crud"},
         "data": {"a": "1", "b": "2"}}
    )  # fmt: skip
    assert store.get("cm", "c", "t-crud")["data"] == {"a": "1", "b": "2"}
    store.patch("configmaps", "c", {"data": {"a": None}}, namespace="t-crud")
    store.patch(
        "configmap", "c", [{"op": "add", "path": "/data/z", "value": "9"}],
        namespace="t-crud", patch_type="json",
    )  # fmt: skip
    assert store.get("configmaps", "c", "t-crud")["data"] == {"b": "2", "z": "9"}
    [listed] = store.list("cm", "t-crud", field_selector="metadata.name=c")
    assert listed["kind"] == "ConfigMap"  # items carry their kind, as tests expect
    store.delete("cm", "c", "t-crud")
    with pytest.raises(ApiError) as missing:
        store.get("cm", "c", "t-crud")
    assert (missing.value.code, missing.value.reason) == (404, "NotFound")
    assert 'configmaps "c" not found' in missing.value.message


def test_node_status_through_the_subresource_and_conflicts(store: ApiStore) -> None:
    created = store.create(node("t-node-1"))
    assert created["status"]["capacity"]["cpu"] == "8"  # a Node keeps the status it is made with
    store.patch("no", "t-node-1", {"status": {"capacity": {"nvidia.com/gpu": "4"}}}, status=True)
    got = store.get("nodes", "t-node-1")
    assert got["status"]["capacity"]["nvidia.com/gpu"] == "4"
    stale = dict(created)
    stale["metadata"] = {**created["metadata"], "labels": {"x": "y"}}
    with pytest.raises(ApiError) as conflict:
        store.update(stale)
    assert (conflict.value.code, conflict.value.reason) == (409, "Conflict")


def test_custom_resources_resolve_once_their_crd_is_served(store: ApiStore) -> None:
    try:
        store.create(cluster_policy_crd())
    except ApiError as e:  # a GPU Operator cluster ran before on this plane: its CRD stays
        assert e.code == 409, e
    assert store.wait_until(lambda: _served(store, "clusterpolicies.nvidia.com"), 20)
    policy = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": {"mig": {"strategy": "single"}},
    }
    store.create(policy)
    assert store.get("clusterpolicies", "cluster-policy")["spec"]["mig"]["strategy"] == "single"


def test_the_change_feed_follows_the_watch(store: ApiStore) -> None:
    seen: list[tuple[str, str, str]] = []
    gone = threading.Event()

    def record(kind: str, key: Any, obj: dict[str, Any]) -> None:
        if key.resource == "pods" and key.namespace == "t-feed":
            seen.append((kind, key.name, obj["metadata"].get("resourceVersion", "")))
            if kind == "DELETED":
                gone.set()

    store.subscribe(record)
    store.watch(["pods"])
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t-feed"}})
    store.create(pod("p", "t-feed"))
    store.patch("pods", "p", {"metadata": {"labels": {"a": "b"}}}, namespace="t-feed")
    store.request("DELETE", "/api/v1/namespaces/t-feed/pods/p?gracePeriodSeconds=0")
    assert gone.wait(20), seen
    kinds = [k for k, _, _ in seen]
    assert kinds[0] == "ADDED" and kinds[-1] == "DELETED" and "MODIFIED" in kinds
    assert store.wait_until(store.synced, 10)
    assert not store.subscriber_errors


def _served(store: ApiStore, name: str) -> bool:
    try:
        store.discovery.lookup(name)
        return True
    except ApiError:
        return False
