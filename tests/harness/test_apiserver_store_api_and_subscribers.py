"""The store's direct API for seeding and for simulated controllers: same rules, change hooks."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.fakes.apiserver import ApiError, FakeApiServer, ObjectKey, Store
from tests.fakes.apiserver.rawclient import RawClient
from tests.fakes.apiserver.samples import daemonset, node, pod


def test_direct_writes_follow_the_http_rules() -> None:
    store = Store()
    created = store.create(node("gpu-1"))
    with pytest.raises(ApiError) as exists:
        store.create(node("gpu-1"))
    assert exists.value.code == 409 and exists.value.reason == "AlreadyExists"
    store.patch("no", "gpu-1", {"metadata": {"labels": {"a": "b"}}})
    with pytest.raises(ApiError) as stale:
        store.update(created)
    assert stale.value.reason == "Conflict"
    with pytest.raises(ApiError) as invalid:
        store.patch("nodes", "gpu-1", {"metadata": {"labels": {"a": "not valid"}}})
    assert invalid.value.code == 422
    with pytest.raises(ApiError) as missing_namespace:
        store.create(pod("p", "nowhere"))
    assert missing_namespace.value.message == 'namespaces "nowhere" not found'


def test_returned_objects_are_private_copies() -> None:
    store = Store()
    store.create(node("gpu-1"))
    mine = store.get("nodes", "gpu-1")
    mine["metadata"]["labels"]["mutated"] = "yes"
    store.list("nodes")[0]["metadata"]["labels"]["mutated"] = "yes"
    assert "mutated" not in store.get("nodes", "gpu-1")["metadata"]["labels"]


def test_list_and_get_by_kubectl_style_names() -> None:
    store = Store()
    store.create(daemonset("plugin"))
    store.create(pod("a", labels={"app": "x"}))
    store.create(pod("b", node_name="gpu-1"))
    assert store.get("daemonsets.apps", "plugin", "kube-system")["kind"] == "DaemonSet"
    assert [p["metadata"]["name"] for p in store.list("po", "default", label_selector="app=x")] == [
        "a"
    ]
    assert [
        p["metadata"]["name"] for p in store.list("pods", field_selector="spec.nodeName=gpu-1")
    ] == ["b"]
    assert store.update_status(
        {**store.get("pods", "a", "default"), "status": {"phase": "Failed"}}
    )["status"] == {"phase": "Failed"}


def test_subscribers_see_every_change_in_commit_order(
    fake_apiserver: FakeApiServer, raw: RawClient
) -> None:
    seen: list[tuple[str, ObjectKey, str]] = []
    unsubscribe = fake_apiserver.store.subscribe(
        lambda kind, key, obj: seen.append((kind, key, obj["metadata"]["resourceVersion"]))
    )
    fake_apiserver.store.create(node("gpu-1"))
    raw.request(
        "PATCH",
        "/api/v1/nodes/gpu-1",
        {"metadata": {"labels": {"a": "b"}}},
        content_type="application/merge-patch+json",
    )
    raw.request("DELETE", "/api/v1/nodes/gpu-1")
    unsubscribe()
    fake_apiserver.store.create(node("gpu-2"))
    assert [(kind, key) for kind, key, _ in seen] == [
        (kind, ObjectKey("", "v1", "nodes", "", "gpu-1"))
        for kind in ("ADDED", "MODIFIED", "DELETED")
    ]
    assert [int(rv) for _, _, rv in seen] == sorted(int(rv) for _, _, rv in seen)


def test_a_subscriber_may_write_like_a_controller(
    fake_apiserver: FakeApiServer, raw: RawClient
) -> None:
    store = fake_apiserver.store

    def kubelet(kind: str, key: ObjectKey, obj: dict[str, Any]) -> None:
        # A simulated kubelet: every pod that lands on a node starts running.
        if key.resource == "pods" and kind == "ADDED" and obj["status"].get("phase") == "Pending":
            store.patch(
                "pods",
                key.name,
                {"status": {"phase": "Running"}},
                namespace=key.namespace,
                status=True,
            )

    store.subscribe(kubelet)
    assert (
        raw.request("POST", "/api/v1/namespaces/default/pods", pod("a", node_name="gpu-1")).status
        == 201
    )
    assert store.wait_until(
        lambda: store.get("pods", "a", "default")["status"]["phase"] == "Running", timeout=2
    )


def test_a_failing_subscriber_does_not_fail_the_write() -> None:
    store = Store()

    def broken(kind: str, key: ObjectKey, obj: dict[str, Any]) -> None:
        raise RuntimeError("controller bug")

    store.subscribe(broken)
    store.create(node("gpu-1"))
    assert store.get("nodes", "gpu-1")["metadata"]["name"] == "gpu-1"
    assert [str(e) for e in store.subscriber_errors] == ["controller bug"]


def test_concurrent_writers_never_reuse_a_version() -> None:
    store = Store()
    versions: list[int] = []
    lock = threading.Lock()

    def writer(prefix: str) -> None:
        for index in range(50):
            rv = int(store.create(node(f"{prefix}-{index}"))["metadata"]["resourceVersion"])
            with lock:
                versions.append(rv)

    threads = [threading.Thread(target=writer, args=(f"w{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(versions)) == 200 and store.resource_version == max(versions)
