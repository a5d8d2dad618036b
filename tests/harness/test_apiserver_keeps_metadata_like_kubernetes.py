"""Server-owned metadata and lifecycle: versions, uids, generation, status, deletion."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from tests.fakes.apiserver import ApiError, FakeApiServer, cluster_policy_crd
from tests.fakes.apiserver.rawclient import RawClient
from tests.fakes.apiserver.samples import daemonset, node, pod

CM = "/api/v1/namespaces/default/configmaps"


def configmap(name: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, **fields}


def test_writes_get_strictly_increasing_decimal_versions(
    fake_apiserver: FakeApiServer, raw: RawClient
) -> None:
    versions = [
        raw.request("POST", CM, configmap(f"c{i}")).json()["metadata"]["resourceVersion"]
        for i in range(3)
    ]
    versions.append(
        raw.request("POST", "/api/v1/nodes", node("gpu-1")).json()["metadata"]["resourceVersion"]
    )
    versions.append(
        fake_apiserver.store.patch("cm", "c0", {"data": {"a": "b"}}, namespace="default")[
            "metadata"
        ]["resourceVersion"]
    )
    assert all(v.isdigit() for v in versions)
    assert [int(v) for v in versions] == sorted({int(v) for v in versions})


def test_create_fills_uid_timestamp_and_namespace_from_the_url(raw: RawClient) -> None:
    created = raw.request("POST", CM, configmap("c", data={"a": "b"}))
    assert created.status == 201
    meta = created.json()["metadata"]
    assert uuid.UUID(meta["uid"]).version == 4
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["creationTimestamp"])
    assert meta["namespace"] == "default"
    assert "generation" not in meta  # the real server keeps no generation for ConfigMaps
    cluster = raw.request(
        "POST", "/api/v1/nodes", {**node("gpu-1"), "metadata": {"name": "gpu-1", "namespace": "x"}}
    )
    assert "namespace" not in cluster.json()["metadata"]


def test_generate_name_adds_five_characters(raw: RawClient) -> None:
    names = {
        raw.request("POST", CM, {"metadata": {"generateName": "cfg-"}}).json()["metadata"]["name"]
        for _ in range(3)
    }
    assert len(names) == 3
    assert all(re.fullmatch(r"cfg-[bcdfghjklmnpqrstvwxz2456789]{5}", n) for n in names)


def test_generation_counts_spec_changes_only(fake_apiserver: FakeApiServer) -> None:
    store = fake_apiserver.store
    assert store.create(daemonset("plugin"))["metadata"]["generation"] == 1
    labelled = store.patch(
        "ds", "plugin", {"metadata": {"labels": {"x": "y"}}}, namespace="kube-system"
    )
    assert labelled["metadata"]["generation"] == 1
    status = store.patch(
        "ds", "plugin", {"status": {"numberReady": 1}}, namespace="kube-system", status=True
    )
    assert status["metadata"]["generation"] == 1
    restarted = store.patch(
        "ds",
        "plugin",
        {"spec": {"template": {"metadata": {"annotations": {"r": "1"}}}}},
        namespace="kube-system",
    )
    assert restarted["metadata"]["generation"] == 2


def test_an_update_that_changes_nothing_keeps_the_version(fake_apiserver: FakeApiServer) -> None:
    store = fake_apiserver.store
    created = store.create(configmap("c", data={"a": "b"}))
    again = store.update(created)
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert store.resource_version == int(created["metadata"]["resourceVersion"])


def test_create_over_http_resets_pod_status_but_seeding_keeps_it(
    fake_apiserver: FakeApiServer, raw: RawClient
) -> None:
    over_http = raw.request("POST", "/api/v1/namespaces/default/pods", pod("a", node_name="n1"))
    assert over_http.json()["status"] == {"phase": "Pending"}
    assert fake_apiserver.store.create(pod("b", node_name="n1"))["status"]["phase"] == "Running"


def test_main_update_ignores_status_where_a_subresource_exists(
    fake_apiserver: FakeApiServer, raw: RawClient
) -> None:
    seeded = fake_apiserver.store.create(node("gpu-1"))
    seeded["status"]["capacity"]["nvidia.com/gpu"] = "8"
    seeded["metadata"]["labels"]["x"] = "y"
    updated = raw.request("PUT", "/api/v1/nodes/gpu-1", seeded).json()
    assert (
        "nvidia.com/gpu" not in updated["status"]["capacity"]
        and updated["metadata"]["labels"]["x"] == "y"
    )
    stale = raw.request("PUT", "/api/v1/nodes/gpu-1/status", seeded)
    assert stale.status == 409  # the status subresource checks resourceVersion too
    seeded["metadata"]["resourceVersion"] = updated["metadata"]["resourceVersion"]
    status = raw.request("PUT", "/api/v1/nodes/gpu-1/status", seeded).json()
    assert status["status"]["capacity"]["nvidia.com/gpu"] == "8"


def test_delete_answers_with_the_object_or_a_success_status(
    fake_apiserver: FakeApiServer, raw: RawClient
) -> None:
    fake_apiserver.store.create(pod("a"))
    fake_apiserver.store.create(configmap("c"))
    deleted_pod = raw.request("DELETE", "/api/v1/namespaces/default/pods/a").json()
    assert (deleted_pod["kind"], deleted_pod["metadata"]["name"]) == ("Pod", "a")
    deleted_cm = raw.request("DELETE", f"{CM}/c").json()
    assert (deleted_cm["kind"], deleted_cm["status"], deleted_cm["details"]["name"]) == (
        "Status",
        "Success",
        "c",
    )


def test_finalizers_hold_a_deletion_until_removed(
    fake_apiserver: FakeApiServer, raw: RawClient
) -> None:
    store = fake_apiserver.store
    store.create(
        configmap("held", metadata={"name": "held", "finalizers": ["kubectl-gpu.io/cleanup"]})
    )
    pending = raw.request("DELETE", f"{CM}/held")
    assert pending.status == 202 and "deletionTimestamp" in pending.json()["metadata"]
    assert "deletionTimestamp" in store.get("cm", "held", "default")["metadata"]
    store.patch("cm", "held", {"metadata": {"finalizers": None}}, namespace="default")
    with pytest.raises(ApiError) as gone:
        store.get("cm", "held", "default")
    assert gone.value.code == 404


def test_deleting_a_namespace_deletes_what_is_in_it(
    fake_apiserver: FakeApiServer, raw: RawClient
) -> None:
    store = fake_apiserver.store
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    store.create(pod("a", "ml"))
    store.create(pod("b", "default"))
    assert raw.request("DELETE", "/api/v1/namespaces/ml").status == 200
    assert [p["metadata"]["name"] for p in store.list("pods")] == ["b"]
    assert raw.request("POST", "/api/v1/namespaces/ml/pods", pod("c", "ml")).status == 404


def test_deleting_a_crd_removes_its_objects_and_endpoints(
    fake_apiserver: FakeApiServer, raw: RawClient
) -> None:
    store = fake_apiserver.store
    store.create(cluster_policy_crd())
    store.create(
        {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cp"}}
    )
    assert raw.get("/apis/nvidia.com/v1/clusterpolicies/cp").status == 200
    store.delete("customresourcedefinitions", "clusterpolicies.nvidia.com")
    assert raw.get("/apis/nvidia.com/v1/clusterpolicies/cp").status == 404
    store.create(cluster_policy_crd())
    assert raw.get("/apis/nvidia.com/v1/clusterpolicies").json()["items"] == []


def test_a_crd_must_be_named_after_its_plural_and_group(raw: RawClient) -> None:
    crd = cluster_policy_crd()
    crd["metadata"]["name"] = "policies.nvidia.com"
    response = raw.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert (response.status, response.json()["reason"]) == (422, "Invalid")
    created = raw.request(
        "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", cluster_policy_crd()
    ).json()
    assert {c["type"]: c["status"] for c in created["status"]["conditions"]} == {
        "NamesAccepted": "True",
        "Established": "True",
    }


def test_dry_run_validates_without_storing(fake_apiserver: FakeApiServer, raw: RawClient) -> None:
    before = fake_apiserver.store.resource_version
    assert raw.request("POST", f"{CM}?dryRun=All", configmap("c")).status == 201
    assert raw.request("POST", f"{CM}?dryRun=All", configmap("Bad")).status == 422
    assert raw.get(f"{CM}/c").status == 404 and fake_apiserver.store.resource_version == before


def test_delete_preconditions_guard_against_a_replaced_object(
    fake_apiserver: FakeApiServer, raw: RawClient
) -> None:
    uid = fake_apiserver.store.create(configmap("c"))["metadata"]["uid"]
    wrong = raw.request(
        "DELETE", f"{CM}/c", {"kind": "DeleteOptions", "preconditions": {"uid": "other"}}
    )
    assert (wrong.status, wrong.json()["reason"]) == (409, "Conflict")
    right = raw.request(
        "DELETE", f"{CM}/c", {"kind": "DeleteOptions", "preconditions": {"uid": uid}}
    )
    assert right.status == 200 and raw.get(f"{CM}/c").status == 404
