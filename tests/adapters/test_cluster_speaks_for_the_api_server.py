"""`cluster.py` against the API stand-in: raw JSON, paging, and errors in the user's words."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

from kubectl_gpu import cluster
from kubectl_gpu.errors import ClusterError, ExitCode
from tests.fakes.apiserver import samples
from tests.fakes.apiserver.server import FakeApiServer, write_kubeconfig
from tests.fakes.ports import refused_port


@pytest.fixture
def api(fake_apiserver: FakeApiServer, kubeconfig: Path) -> cluster.Api:
    return cluster.connect(str(kubeconfig))


def configmap(name: str, namespace: str = "default", **labels: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "data": {"k": "v"},
    }


def test_errors_are_ours_not_the_clients() -> None:
    assert not issubclass(ClusterError, ApiException)


def test_connect_names_the_context_and_server(
    api: cluster.Api, fake_apiserver: FakeApiServer
) -> None:
    assert api.context == "fake" and api.server == fake_apiserver.url


def test_get_returns_the_object_as_plain_json(
    api: cluster.Api, fake_apiserver: FakeApiServer
) -> None:
    fake_apiserver.store.create(samples.node("gpu-1", labels={"a": "b"}))
    node = api.get(cluster.path("nodes", "gpu-1"))
    assert node["metadata"]["labels"]["a"] == "b" and isinstance(node, dict)


def test_list_reads_every_page_once(api: cluster.Api, fake_apiserver: FakeApiServer) -> None:
    for i in range(23):
        fake_apiserver.store.create(configmap(f"cm-{i:02}", tier="gpu" if i % 2 else "cpu"))
    names = [
        o["metadata"]["name"]
        for o in api.list(cluster.path("configmaps", namespace="default"), page_size=5)
    ]
    assert sorted(names) == [f"cm-{i:02}" for i in range(23)]
    pages = [r for r in fake_apiserver.requests if "continue=" in r.query]
    assert len(pages) == 4


def test_list_passes_selectors(api: cluster.Api, fake_apiserver: FakeApiServer) -> None:
    for i in range(4):
        fake_apiserver.store.create(configmap(f"cm-{i}", tier="gpu" if i % 2 else "cpu"))
    selected = api.list(
        cluster.path("configmaps"),
        label_selector="tier=gpu",
        field_selector="metadata.namespace=default",
    )
    assert sorted(o["metadata"]["name"] for o in selected) == ["cm-1", "cm-3"]


def test_patch_kinds_reach_the_server(api: cluster.Api, fake_apiserver: FakeApiServer) -> None:
    fake_apiserver.store.create(samples.node("gpu-1"))
    url = cluster.path("nodes", "gpu-1")
    api.patch(url, {"metadata": {"labels": {"x": "1"}}})
    api.patch(url, [{"op": "add", "path": "/metadata/labels/y", "value": "2"}], kind="json")
    labels = api.get(url)["metadata"]["labels"]
    assert labels["x"] == "1" and labels["y"] == "2"


def test_not_found_says_what_is_missing(api: cluster.Api) -> None:
    with pytest.raises(ClusterError) as caught:
        api.get(cluster.path("configmaps", "nope", "default"))
    assert caught.value.status == 404
    assert 'configmaps "nope" not found' in caught.value.message


def test_stale_replace_is_a_409_the_caller_can_retry(
    api: cluster.Api, fake_apiserver: FakeApiServer
) -> None:
    fake_apiserver.store.create(configmap("cfg"))
    url = cluster.path("configmaps", "cfg", "default")
    stale = api.get(url)
    api.patch(url, {"data": {"k": "changed"}})
    with pytest.raises(ClusterError) as caught:
        api.replace(url, stale)
    assert caught.value.status == 409


def test_forbidden_names_the_missing_permission(
    api: cluster.Api, fake_apiserver: FakeApiServer
) -> None:
    fake_apiserver.deny("patch", "configmaps", namespace="default")
    fake_apiserver.store.create(configmap("cfg"))
    with pytest.raises(ClusterError) as caught:
        api.patch(cluster.path("configmaps", "cfg", "default"), {"data": {"k": "v2"}})
    assert caught.value.status == 403 and caught.value.exit_code is ExitCode.ERROR
    assert "cannot patch resource" in caught.value.message
    assert "'patch' on 'configmaps' (API group core)" in caught.value.hint


def test_an_unreachable_server_is_named_with_its_context(tmp_path: Path) -> None:
    with refused_port() as port:
        config = write_kubeconfig(f"http://127.0.0.1:{port}", tmp_path / "kubeconfig")
        api = cluster.connect(str(config), timeout=2)
        with pytest.raises(ClusterError) as caught:
            api.get(cluster.path("nodes"))
    assert f"cannot reach the API server at http://127.0.0.1:{port}" in caught.value.message
    assert "fake-token" not in caught.value.message + caught.value.hint


def test_a_missing_kubeconfig_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ClusterError) as caught:
        cluster.connect(str(tmp_path / "none"))
    assert "cannot load the cluster configuration" in caught.value.message


def test_an_unknown_context_is_a_clear_error(kubeconfig: Path) -> None:
    with pytest.raises(ClusterError) as caught:
        cluster.connect(str(kubeconfig), context="prod")
    assert "prod" in caught.value.message


def test_kubeconfig_is_read_from_the_environment_at_connect_time(
    kubeconfig: Path, fake_apiserver: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The kubernetes client reads $KUBECONFIG once, when imported (long before this test).
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    assert cluster.connect().server == fake_apiserver.url


def test_watch_streams_one_objects_changes_until_the_server_ends_it(
    api: cluster.Api, fake_apiserver: FakeApiServer
) -> None:
    fake_apiserver.store.create(samples.node("gpu-1"))
    fake_apiserver.store.create(samples.node("gpu-2"))
    listed = api.request(
        "GET", cluster.path("nodes"), query={"fieldSelector": "metadata.name=gpu-1"}
    )
    version = listed["metadata"]["resourceVersion"]
    fake_apiserver.store.patch("nodes", "gpu-2", {"metadata": {"labels": {"x": "1"}}})
    fake_apiserver.store.patch("nodes", "gpu-1", {"metadata": {"labels": {"x": "2"}}})

    events = api.watch(
        cluster.path("nodes"), field_selector="metadata.name=gpu-1", resource_version=version,
        seconds=1,
    )  # fmt: skip
    seen = [(e["type"], e["object"]["metadata"]["name"]) for e in events if e["type"] != "BOOKMARK"]

    assert seen == [("MODIFIED", "gpu-1")]  # and the stream ended after its 1 s


def test_a_watch_on_a_server_that_went_away_is_a_cluster_error(tmp_path: Path) -> None:
    with refused_port() as port:
        kubeconfig = write_kubeconfig(f"http://127.0.0.1:{port}", tmp_path / "kubeconfig")
        api = cluster.connect(str(kubeconfig))
        with pytest.raises(ClusterError, match="cannot reach the API server"):
            list(api.watch(cluster.path("nodes"), seconds=1))
