"""Watch: chunked JSON-lines streams of ADDED/MODIFIED/DELETED, from a version or from now."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.apiserver import FakeApiServer, Store
from tests.fakes.apiserver.rawclient import RawClient
from tests.fakes.apiserver.samples import node

NODES = "/api/v1/nodes"


def later(delay: float, action: Any, *args: Any, **kwargs: Any) -> threading.Timer:
    timer = threading.Timer(delay, action, args, kwargs)
    timer.start()
    return timer


def summary(event: dict[str, Any]) -> tuple[str, str]:
    return event["type"], event["object"]["metadata"]["name"]


def take(events: Iterator[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    return [next(events) for _ in range(count)]


def test_watch_without_version_starts_with_current_objects(
    fake_apiserver: FakeApiServer, raw: RawClient
) -> None:
    store = fake_apiserver.store
    store.create(node("gpu-1"))
    store.create(node("gpu-2"))
    timer = later(0.1, store.create, node("gpu-3"))
    with raw.watch(f"{NODES}?watch=true&timeoutSeconds=5") as events:
        assert [summary(e) for e in take(events, 3)] == [
            ("ADDED", "gpu-1"),
            ("ADDED", "gpu-2"),
            ("ADDED", "gpu-3"),
        ]
    timer.join()


def test_watch_from_a_version_replays_later_changes_in_order(
    fake_apiserver: FakeApiServer, raw: RawClient
) -> None:
    store = fake_apiserver.store
    store.create(node("gpu-1"))
    since = store.resource_version
    store.patch("nodes", "gpu-1", {"metadata": {"labels": {"a": "1"}}})
    store.create(node("gpu-2"))
    store.delete("nodes", "gpu-1")
    with raw.watch(f"{NODES}?watch=1&resourceVersion={since}&timeoutSeconds=5") as events:
        seen = take(events, 3)
    assert [summary(e) for e in seen] == [
        ("MODIFIED", "gpu-1"),
        ("ADDED", "gpu-2"),
        ("DELETED", "gpu-1"),
    ]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in seen]
    assert versions == sorted(versions) and versions[0] > since


def test_selector_entering_and_leaving_reads_as_added_and_deleted(
    fake_apiserver: FakeApiServer, raw: RawClient
) -> None:
    store = fake_apiserver.store
    store.create(node("gpu-1"))
    since = store.resource_version
    store.patch("nodes", "gpu-1", {"metadata": {"labels": {"pool": "a100"}}})
    store.patch("nodes", "gpu-1", {"metadata": {"labels": {"note": "still-in"}}})
    store.patch("nodes", "gpu-1", {"metadata": {"labels": {"pool": "h100"}}})
    store.create(node("gpu-2", labels={"pool": "h100"}))
    with raw.watch(
        f"{NODES}?watch=true&labelSelector=pool%3Da100&resourceVersion={since}&timeoutSeconds=1"
    ) as events:
        assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]


def test_watch_of_one_name_sees_only_that_object(
    fake_apiserver: FakeApiServer, raw: RawClient
) -> None:
    store = fake_apiserver.store
    store.create(node("gpu-1"))
    store.create(node("gpu-2"))
    since = store.resource_version
    store.patch("nodes", "gpu-2", {"metadata": {"labels": {"x": "1"}}})
    store.patch("nodes", "gpu-1", {"metadata": {"labels": {"x": "1"}}})
    query = (
        f"watch=true&fieldSelector=metadata.name%3Dgpu-1&resourceVersion={since}&timeoutSeconds=1"
    )
    with raw.watch(f"{NODES}?{query}") as events:
        assert [summary(e) for e in events] == [("MODIFIED", "gpu-1")]
    with raw.watch(f"/api/v1/watch/nodes/gpu-2?resourceVersion={since}&timeoutSeconds=1") as events:
        assert [summary(e) for e in events] == [("MODIFIED", "gpu-2")]


def test_namespaced_watch_ignores_other_namespaces(
    fake_apiserver: FakeApiServer, raw: RawClient
) -> None:
    store = fake_apiserver.store
    since = store.resource_version
    for namespace in ("kube-system", "default"):
        store.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "c", "namespace": namespace},
            }
        )
    path = (
        f"/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={since}&timeoutSeconds=1"
    )
    with raw.watch(path) as events:
        assert [(e["type"], e["object"]["metadata"]["namespace"]) for e in events] == [
            ("ADDED", "default")
        ]


def test_timeout_seconds_ends_the_stream(raw: RawClient) -> None:
    started = time.monotonic()
    with raw.watch(f"{NODES}?watch=true&resourceVersion=1&timeoutSeconds=1") as events:
        assert list(events) == []
    assert 0.9 < time.monotonic() - started < 3


def test_a_version_older_than_the_history_is_expired() -> None:
    with FakeApiServer(Store(history=3)) as server:
        for index in range(5):
            server.store.create(node(f"gpu-{index}"))
        with RawClient(server.url).watch(f"{NODES}?watch=true&resourceVersion=2") as events:
            error = next(events)
            assert list(events) == []
    assert error["type"] == "ERROR"
    assert {k: error["object"][k] for k in ("kind", "code", "reason")} == {
        "kind": "Status",
        "code": 410,
        "reason": "Expired",
    }
    assert error["object"]["message"].startswith("too old resource version: 2 (")


def test_stopping_the_server_ends_open_watches(
    fake_apiserver: FakeApiServer, raw: RawClient
) -> None:
    stop = later(0.3, fake_apiserver.stop)
    started = time.monotonic()
    with raw.watch(f"{NODES}?watch=true&resourceVersion=1") as events:
        assert list(events) == []
    stop.join()
    assert time.monotonic() - started < 3


def test_bookmarks_arrive_when_asked_for(fake_apiserver: FakeApiServer, raw: RawClient) -> None:
    with raw.watch(
        f"{NODES}?watch=true&resourceVersion=1&allowWatchBookmarks=true&timeoutSeconds=2"
    ) as events:
        bookmark = next(events)
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["object"]["metadata"]["resourceVersion"] == str(
        fake_apiserver.store.resource_version
    )


def test_a_client_hanging_up_releases_its_watch(
    fake_apiserver: FakeApiServer, raw: RawClient
) -> None:
    with raw.watch(f"{NODES}?watch=true&resourceVersion=1") as events:
        assert events is not None
        assert fake_apiserver.store.watch_count == 1
    assert fake_apiserver.store.wait_until(lambda: fake_apiserver.store.watch_count == 0, timeout=3)


@pytest.mark.parametrize(
    "accept", ["application/json;as=Table;v=v1;g=meta.k8s.io,application/json"]
)
def test_table_watch_events_carry_columns_once(fake_apiserver: FakeApiServer, accept: str) -> None:
    store = fake_apiserver.store
    since = store.resource_version
    store.create(node("gpu-1"))
    store.create(node("gpu-2"))
    raw = RawClient(fake_apiserver.url)
    response = raw.request(
        "GET",
        f"{NODES}?watch=true&resourceVersion={since}&timeoutSeconds=1",
        headers={"Accept": accept},
    )
    first, second = [json.loads(line) for line in response.body.splitlines()]
    assert first["object"]["kind"] == "Table"
    assert [c["name"] for c in first["object"]["columnDefinitions"]][:3] == [
        "Name",
        "Status",
        "Roles",
    ]
    assert second["object"]["columnDefinitions"] == []
    assert second["object"]["rows"][0]["cells"][:2] == ["gpu-2", "Ready"]
