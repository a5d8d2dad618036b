"""`cluster.py` against the real kube-apiserver: raw JSON, paging, watches, and errors in the
user's words (the real server's 404, 409 and RBAC 403). Requests go through a `FaultProxy`
that injects nothing here: it only counts the pages a list asked for."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from kubectl_gpu import cluster
from kubectl_gpu.errors import ClusterError, ExitCode
from tests.kit.plane.faults import FaultProxy
from tests.kit.plane.plane import ControlPlane
from tests.kit.plane.ports import refused_port
from tests.kit.plane.users import plain_kubeconfig

Obj = dict[str, Any]
_names = itertools.count()


@pytest.fixture
def api(proxied_kubeconfig: Path) -> cluster.Api:
    return cluster.connect(str(proxied_kubeconfig))


@pytest.fixture
def namespace(api: cluster.Api) -> str:
    """A namespace of the test's own (the module's leftovers go when it ends)."""
    name = f"speaks-{next(_names)}"
    api.create(cluster.path("namespaces"), {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": name}})  # fmt: skip
    return name


@pytest.fixture
def node(api: cluster.Api) -> str:
    """A Node of the test's own, labelled a=b."""
    name = f"speaks-gpu-{next(_names)}"
    labels = {"a": "b"}
    api.create(cluster.path("nodes"), {"apiVersion": "v1", "kind": "Node",
                                       "metadata": {"name": name, "labels": labels}})  # fmt: skip
    return name


def configmap(name: str, namespace: str, **labels: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "data": {"k": "v"},
    }


def test_errors_are_ours_not_the_clients() -> None:
    assert not issubclass(ClusterError, ApiException)


def test_connect_names_the_context_and_server(api: cluster.Api, fault_proxy: FaultProxy) -> None:
    assert api.context == "kgpu-test" and api.server == fault_proxy.url


def test_get_returns_the_object_as_plain_json(api: cluster.Api, node: str) -> None:
    got = api.get(cluster.path("nodes", node))
    assert got["metadata"]["labels"]["a"] == "b" and isinstance(got, dict)


def test_list_reads_every_page_once(
    api: cluster.Api, namespace: str, fault_proxy: FaultProxy
) -> None:
    for i in range(23):
        api.create(cluster.path("configmaps", namespace=namespace), configmap(f"cm-{i:02}",
                   namespace, set="paged"))  # fmt: skip
    fault_proxy.seen.clear()

    listed = api.list(
        cluster.path("configmaps", namespace=namespace), label_selector="set=paged", page_size=5
    )

    assert sorted(o["metadata"]["name"] for o in listed) == [f"cm-{i:02}" for i in range(23)]
    asked = [s.path for s in fault_proxy.seen if "/configmaps" in s.path]
    assert len(asked) == 5 and sum("continue=" in p for p in asked) == 4, asked


def test_list_passes_selectors(api: cluster.Api, namespace: str) -> None:
    for i in range(4):
        api.create(cluster.path("configmaps", namespace=namespace), configmap(f"cm-{i}",
                   namespace, tier="gpu" if i % 2 else "cpu"))  # fmt: skip
    selected = api.list(
        cluster.path("configmaps"),
        label_selector="tier=gpu",
        field_selector=f"metadata.namespace={namespace}",
    )
    assert sorted(o["metadata"]["name"] for o in selected) == ["cm-1", "cm-3"]


def test_patch_kinds_reach_the_server(api: cluster.Api, node: str) -> None:
    url = cluster.path("nodes", node)
    api.patch(url, {"metadata": {"labels": {"x": "1"}}})
    api.patch(url, [{"op": "add", "path": "/metadata/labels/y", "value": "2"}], kind="json")
    labels = api.get(url)["metadata"]["labels"]
    assert labels["x"] == "1" and labels["y"] == "2"


def test_not_found_says_what_is_missing(api: cluster.Api) -> None:
    with pytest.raises(ClusterError) as caught:
        api.get(cluster.path("configmaps", "nope", "default"))
    assert caught.value.status == 404
    assert 'configmaps "nope" not found' in caught.value.message


def test_stale_replace_is_a_409_the_caller_can_retry(api: cluster.Api, namespace: str) -> None:
    api.create(cluster.path("configmaps", namespace=namespace), configmap("cfg", namespace))
    url = cluster.path("configmaps", "cfg", namespace)
    stale = api.get(url)
    api.patch(url, {"data": {"k": "changed"}})
    with pytest.raises(ClusterError) as caught:
        api.replace(url, stale)
    assert caught.value.status == 409


def test_forbidden_names_the_missing_permission(
    api: cluster.Api, namespace: str, module_plane: ControlPlane, tmp_path: Path
) -> None:
    api.create(cluster.path("configmaps", namespace=namespace), configmap("cfg", namespace))
    denied = module_plane.user_denied(
        "speaks-no-patch", tmp_path / "denied", [("patch", "configmaps", "")]
    )
    with pytest.raises(ClusterError) as caught:
        cluster.connect(str(denied)).patch(
            cluster.path("configmaps", "cfg", namespace), {"data": {"k": "v2"}}
        )
    assert caught.value.status == 403 and caught.value.exit_code is ExitCode.ERROR
    assert "cannot patch resource" in caught.value.message
    assert "'patch' on 'configmaps' (API group core)" in caught.value.hint


def test_an_unreachable_server_is_named_with_its_context(tmp_path: Path) -> None:
    with refused_port() as port:
        config = plain_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{port}")
        api = cluster.connect(str(config), timeout=2)
        with pytest.raises(ClusterError) as caught:
            api.get(cluster.path("nodes"))
    assert f"cannot reach the API server at http://127.0.0.1:{port}" in caught.value.message
    assert "placeholder-token" not in caught.value.message + caught.value.hint


def test_a_missing_kubeconfig_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ClusterError) as caught:
        cluster.connect(str(tmp_path / "none"))
    assert "cannot load the cluster configuration" in caught.value.message


def test_an_unknown_context_is_a_clear_error(proxied_kubeconfig: Path) -> None:
    with pytest.raises(ClusterError) as caught:
        cluster.connect(str(proxied_kubeconfig), context="prod")
    assert "prod" in caught.value.message


def test_kubeconfig_is_read_from_the_environment_at_connect_time(
    proxied_kubeconfig: Path, fault_proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The kubernetes client reads $KUBECONFIG once, when imported (long before this test).
    monkeypatch.setenv("KUBECONFIG", str(proxied_kubeconfig))
    assert cluster.connect().server == fault_proxy.url


def test_watch_streams_one_objects_changes_until_the_server_ends_it(api: cluster.Api) -> None:
    watched, other = (f"speaks-watched-{next(_names)}" for _ in range(2))
    for name in (watched, other):
        api.create(cluster.path("nodes"), {"apiVersion": "v1", "kind": "Node",
                                           "metadata": {"name": name}})  # fmt: skip
    selector = f"metadata.name={watched}"
    listed = api.request("GET", cluster.path("nodes"), query={"fieldSelector": selector})
    version = listed["metadata"]["resourceVersion"]
    api.patch(cluster.path("nodes", other), {"metadata": {"labels": {"x": "1"}}})
    api.patch(cluster.path("nodes", watched), {"metadata": {"labels": {"x": "2"}}})

    events = api.watch(
        cluster.path("nodes"), field_selector=selector, resource_version=version, seconds=1
    )
    changes = [e for e in events if e["type"] != "BOOKMARK"]  # the stream ended after 1 s

    # only the watched node's changes after `version` (KWOK may write its status too)
    assert {(e["type"], e["object"]["metadata"]["name"]) for e in changes} == {
        ("MODIFIED", watched)
    }
    assert any((e["object"]["metadata"].get("labels") or {}).get("x") == "2" for e in changes)


def test_a_watch_on_a_server_that_went_away_is_a_cluster_error(tmp_path: Path) -> None:
    with refused_port() as port:
        kubeconfig = plain_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{port}")
        api = cluster.connect(str(kubeconfig))
        with pytest.raises(ClusterError, match="cannot reach the API server"):
            list(api.watch(cluster.path("nodes"), seconds=1))
