"""PATCH in its four content types, and what each may and may not change."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.apiserver import FakeApiServer, cluster_policy_crd
from tests.fakes.apiserver.patching import json_patch, merge_patch, strategic_merge
from tests.fakes.apiserver.rawclient import RawClient
from tests.fakes.apiserver.samples import daemonset, node

DS = "/apis/apps/v1/namespaces/kube-system/daemonsets/plugin"
MERGE, JSONP = "application/merge-patch+json", "application/json-patch+json"
SMP, APPLY = "application/strategic-merge-patch+json", "application/apply-patch+yaml"


@pytest.fixture(autouse=True)
def seeded(fake_apiserver: FakeApiServer) -> None:
    ds = daemonset("plugin")
    spec = ds["spec"]["template"]["spec"]
    spec["containers"][0]["env"] = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    spec["containers"].append({"name": "sidecar", "image": "s:1"})
    spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    ds["metadata"]["finalizers"] = ["a/keep"]
    fake_apiserver.store.create(ds)
    fake_apiserver.store.create(node("gpu-1"))


def patch(raw: RawClient, body: Any, content_type: str, path: str = DS) -> dict[str, Any]:
    response = raw.request("PATCH", path, body, content_type=content_type)
    assert response.status == 200, response.body
    result: dict[str, Any] = response.json()
    return result


def template(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


def test_merge_patch_replaces_lists_and_null_deletes(raw: RawClient) -> None:
    body = {
        "metadata": {"labels": {"app": None, "new": "x"}},
        "spec": {"template": {"spec": {"tolerations": []}}},
    }
    result = patch(raw, body, MERGE)
    assert result["metadata"]["labels"] == {"new": "x"}
    assert template(result)["tolerations"] == []
    assert [c["name"] for c in template(result)["containers"]] == ["plugin", "sidecar"]


def test_json_patch_applies_every_operation_in_order(raw: RawClient) -> None:
    ops = [
        {"op": "test", "path": "/metadata/name", "value": "plugin"},
        {"op": "add", "path": "/metadata/labels/tier", "value": "gpu"},
        {"op": "replace", "path": "/spec/template/spec/containers/1/image", "value": "s:2"},
        {"op": "copy", "from": "/metadata/labels/tier", "path": "/metadata/labels/copy"},
        {"op": "move", "from": "/metadata/labels/copy", "path": "/metadata/labels/moved"},
        {"op": "remove", "path": "/spec/template/spec/tolerations/0"},
        {"op": "add", "path": "/metadata/finalizers/-", "value": "b/keep"},
    ]
    result = patch(raw, ops, JSONP)
    assert result["metadata"]["labels"] == {"app": "plugin", "tier": "gpu", "moved": "gpu"}
    assert template(result)["containers"][1]["image"] == "s:2"
    assert template(result)["tolerations"] == []
    assert result["metadata"]["finalizers"] == ["a/keep", "b/keep"]


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        (
            [{"op": "test", "path": "/metadata/name", "value": "other"}],
            "testing value /metadata/name failed",
        ),
        ([{"op": "remove", "path": "/metadata/nothing"}], "doc is missing path"),
        ([{"op": "replace", "path": "/spec/x/y", "value": 1}], "doc is missing path"),
    ],
)
def test_json_patch_failure_is_422_and_changes_nothing(
    fake_apiserver: FakeApiServer, raw: RawClient, ops: list[dict[str, Any]], message: str
) -> None:
    before = fake_apiserver.store.get("ds", "plugin", "kube-system")
    response = raw.request(
        "PATCH",
        DS,
        [{"op": "add", "path": "/metadata/labels/x", "value": "y"}, *ops],
        content_type=JSONP,
    )
    assert (response.status, response.json()["reason"]) == (422, "Invalid")
    assert message in response.json()["message"]
    assert fake_apiserver.store.get("ds", "plugin", "kube-system") == before


def test_strategic_merge_merges_named_lists_and_honours_directives(raw: RawClient) -> None:
    body = {
        "metadata": {"finalizers": ["b/keep"]},
        "spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "plugin"}, {"name": "sidecar"}],
            "containers": [
                {"name": "plugin",
                 "env": [{"name": "B", "value": "20"}, {"name": "A", "$patch": "delete"}]},
                {"name": "sidecar", "$patch": "delete"},
            ],
            "tolerations": [{"operator": "Exists"}],
        }}},
    }  # fmt: skip
    result = patch(raw, body, SMP)
    containers = template(result)["containers"]
    assert [c["name"] for c in containers] == ["plugin"]
    assert containers[0]["env"] == [{"name": "B", "value": "20"}]
    assert containers[0]["image"].startswith("nvcr.io/")
    assert template(result)["tolerations"] == [{"operator": "Exists"}]  # no merge key: replaced
    assert result["metadata"]["finalizers"] == ["a/keep", "b/keep"]  # finalizers unite


def test_strategic_merge_functions_directly() -> None:
    target = {"spec": {"ports": [{"containerPort": 80, "name": "http"}], "finalizers": ["a", "b"]}}
    patched = strategic_merge(
        target,
        {
            "spec": {
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "$deleteFromPrimitiveList/finalizers": ["a"],
            }
        },
    )
    assert patched == {
        "spec": {
            "ports": [{"containerPort": 80, "name": "http", "protocol": "TCP"}],
            "finalizers": ["b"],
        }
    }
    assert strategic_merge({"a": {"x": 1, "y": 2}}, {"a": {"$patch": "replace", "z": 3}}) == {
        "a": {"z": 3}
    }
    assert merge_patch({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}
    assert json_patch({"a": [1]}, [{"op": "add", "path": "/a/0", "value": 0}]) == {"a": [0, 1]}


def test_strategic_merge_is_refused_for_custom_resources_but_merge_works(
    fake_apiserver: FakeApiServer, raw: RawClient
) -> None:
    fake_apiserver.store.create(cluster_policy_crd())
    fake_apiserver.store.create(
        {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cp"}}
    )
    path = "/apis/nvidia.com/v1/clusterpolicies/cp"
    assert raw.request("PATCH", path, {"spec": {"a": 1}}, content_type=SMP).status == 415
    assert patch(raw, {"spec": {"a": 1}}, MERGE, path)["spec"] == {"a": 1}


def test_apply_patch_creates_then_merges(fake_apiserver: FakeApiServer, raw: RawClient) -> None:
    path = "/api/v1/namespaces/default/configmaps/applied?fieldManager=test"
    first = raw.request(
        "PATCH",
        path,
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  a: '1'\n",
        content_type=APPLY,
    )
    assert first.status == 201
    second = raw.request(
        "PATCH", path, b"metadata:\n  name: applied\ndata:\n  b: '2'\n", content_type=APPLY
    )
    assert second.status == 200
    assert fake_apiserver.store.get("cm", "applied", "default")["data"] == {"a": "1", "b": "2"}


def test_status_patch_changes_only_status_and_main_patch_never_status(raw: RawClient) -> None:
    gpus = {
        "status": {"capacity": {"nvidia.com/gpu": "8"}},
        "metadata": {"labels": {"via": "status"}},
    }
    after_status = patch(raw, gpus, MERGE, "/api/v1/nodes/gpu-1/status")
    assert after_status["status"]["capacity"]["nvidia.com/gpu"] == "8"
    assert "via" not in after_status["metadata"]["labels"]
    after_main = patch(
        raw,
        {"status": {"capacity": {"nvidia.com/gpu": "1"}}, "metadata": {"labels": {"via": "main"}}},
        MERGE,
        "/api/v1/nodes/gpu-1",
    )
    assert after_main["status"]["capacity"]["nvidia.com/gpu"] == "8"
    assert after_main["metadata"]["labels"]["via"] == "main"


def test_patch_carrying_a_stale_resource_version_conflicts(raw: RawClient) -> None:
    response = raw.request(
        "PATCH",
        DS,
        {"metadata": {"resourceVersion": "1", "labels": {"x": "y"}}},
        content_type=MERGE,
    )
    assert (response.status, response.json()["reason"]) == (409, "Conflict")


def test_patch_with_an_unknown_content_type_is_415(raw: RawClient) -> None:
    response = raw.request("PATCH", DS, {"spec": {}}, content_type="text/plain")
    assert (response.status, response.json()["reason"]) == (415, "UnsupportedMediaType")
