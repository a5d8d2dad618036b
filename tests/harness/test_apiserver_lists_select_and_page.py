"""LIST answers: `<Kind>List` bodies, label and field selectors, limit/continue paging."""

from __future__ import annotations

from urllib.parse import quote, urlencode

import pytest

from tests.fakes.apiserver import FakeApiServer
from tests.fakes.apiserver.rawclient import RawClient
from tests.fakes.apiserver.samples import pod

LABELS = {
    "a": {"app": "train", "gpu": "a100"},
    "b": {"app": "train", "gpu": "h100"},
    "c": {"app": "serve", "gpu": "a100", "canary": ""},
    "d": {"app": "serve"},
    "e": {"tier": "7"},
}


@pytest.fixture(autouse=True)
def pods(fake_apiserver: FakeApiServer) -> None:
    store = fake_apiserver.store
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    for name, labels in LABELS.items():
        store.create(
            pod(name, "ml" if name in "ab" else "default", node_name=f"n-{name}", labels=labels)
        )


def names(raw: RawClient, query: str, path: str = "/api/v1/pods") -> list[str]:
    key, _, value = query.partition("=")
    response = raw.get(f"{path}?{urlencode({key: value})}")
    assert response.status == 200, response.body
    return [item["metadata"]["name"] for item in response.json()["items"]]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=train", ["a", "b"]),
        ("app==serve", ["c", "d"]),
        ("app!=train", ["c", "d", "e"]),
        ("gpu", ["c", "a", "b"]),
        ("!gpu", ["d", "e"]),
        ("gpu in (a100, h100),app notin (serve)", ["a", "b"]),
        ("app in (serve),canary", ["c"]),
        ("canary=", ["c"]),
        ("tier>5", ["e"]),
        ("tier<5", []),
    ],
)
def test_label_selector(raw: RawClient, selector: str, expected: list[str]) -> None:
    assert sorted(names(raw, f"labelSelector={selector}")) == sorted(expected)


@pytest.mark.parametrize("selector", ["app in (a", "=x", "bad key=x", "app=in valid", "x in a"])
def test_unparseable_label_selector_is_a_bad_request(raw: RawClient, selector: str) -> None:
    response = raw.get(f"/api/v1/pods?labelSelector={quote(selector)}")
    assert (response.status, response.json()["reason"]) == (400, "BadRequest")


def test_field_selectors_on_name_namespace_node_and_phase(
    fake_apiserver: FakeApiServer, raw: RawClient
) -> None:
    fake_apiserver.store.patch("pods", "d", {"status": {"phase": "Failed"}}, status=True)
    assert names(raw, "fieldSelector=metadata.name=a") == ["a"]
    assert names(raw, "fieldSelector=metadata.namespace!=ml") == ["c", "d", "e"]
    assert names(raw, "fieldSelector=spec.nodeName==n-b") == ["b"]
    assert names(raw, "fieldSelector=status.phase=Failed") == ["d"]
    assert names(raw, "fieldSelector=status.phase=Running,metadata.namespace=default") == ["c", "e"]


def test_unsupported_field_label_is_refused(raw: RawClient) -> None:
    response = raw.get("/api/v1/pods?fieldSelector=spec.schedulerHints=x")
    assert response.status == 400
    assert response.json()["message"] == "field label not supported: spec.schedulerHints"
    assert raw.get("/api/v1/configmaps?fieldSelector=spec.nodeName=x").status == 400


def test_list_body_names_its_kind_and_version(
    fake_apiserver: FakeApiServer, raw: RawClient
) -> None:
    body = raw.get("/api/v1/namespaces/ml/pods").json()
    assert (body["kind"], body["apiVersion"]) == ("PodList", "v1")
    assert body["metadata"]["resourceVersion"] == str(fake_apiserver.store.resource_version)
    assert [p["metadata"]["name"] for p in body["items"]] == ["a", "b"]
    assert body["items"][0] == raw.get("/api/v1/namespaces/ml/pods/a").json()
    daemonsets = raw.get("/apis/apps/v1/daemonsets").json()
    assert (daemonsets["kind"], daemonsets["apiVersion"], daemonsets["items"]) == (
        "DaemonSetList",
        "apps/v1",
        [],
    )


def test_all_namespace_list_is_ordered_by_namespace_then_name(raw: RawClient) -> None:
    body = raw.get("/api/v1/pods").json()
    assert [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in body["items"]] == [
        ("default", "c"), ("default", "d"), ("default", "e"), ("ml", "a"), ("ml", "b"),
    ]  # fmt: skip


def test_paging_returns_continue_tokens_and_remaining_counts(raw: RawClient) -> None:
    first = raw.get("/api/v1/pods?limit=2").json()
    assert [p["metadata"]["name"] for p in first["items"]] == ["c", "d"]
    assert first["metadata"]["remainingItemCount"] == 3
    token = first["metadata"]["continue"]
    second = raw.get(f"/api/v1/pods?limit=2&continue={token}").json()
    assert [p["metadata"]["name"] for p in second["items"]] == ["e", "a"]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    last = raw.get(f"/api/v1/pods?limit=2&continue={second['metadata']['continue']}").json()
    assert [p["metadata"]["name"] for p in last["items"]] == ["b"]
    assert "continue" not in last["metadata"] and "remainingItemCount" not in last["metadata"]


def test_paging_with_a_selector_skips_unselected_items(raw: RawClient) -> None:
    first = raw.get("/api/v1/pods?limit=1&labelSelector=gpu=a100").json()
    assert [p["metadata"]["name"] for p in first["items"]] == ["c"]
    assert (
        "remainingItemCount" not in first["metadata"]
    )  # the real server does not count filtered lists
    rest = raw.get(
        f"/api/v1/pods?limit=1&labelSelector=gpu=a100&continue={first['metadata']['continue']}"
    )
    assert [p["metadata"]["name"] for p in rest.json()["items"]] == ["a"]
    assert "continue" not in rest.json()["metadata"]


def test_a_forged_continue_token_is_a_bad_request(raw: RawClient) -> None:
    response = raw.get("/api/v1/pods?limit=1&continue=not-a-token")
    assert (response.status, response.json()["reason"]) == (400, "BadRequest")
