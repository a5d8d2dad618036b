"""The real `kubernetes` Python client works against the stand-in, errors included."""

from __future__ import annotations

import json
import threading

import pytest
from kubernetes import watch
from kubernetes.client import (
    ApiClient,
    ApiextensionsV1Api,
    CoreV1Api,
    CustomObjectsApi,
    V1ConfigMap,
    V1ObjectMeta,
)
from kubernetes.client.exceptions import ApiException

from tests.fakes.apiserver import FakeApiServer, cluster_policy_crd
from tests.fakes.apiserver.samples import node, pod


def test_configmap_round_trip_create_read_replace_patch_delete(api_client: ApiClient) -> None:
    core = CoreV1Api(api_client)
    body = V1ConfigMap(metadata=V1ObjectMeta(name="plugin-config"), data={"any": "v1"})
    created = core.create_namespaced_config_map("default", body)
    assert created.metadata.uid and created.metadata.resource_version
    created.data["any"] = "v2"
    replaced = core.replace_namespaced_config_map("plugin-config", "default", created)
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    patched = core.patch_namespaced_config_map("plugin-config", "default", {"data": {"more": "x"}})
    assert patched.data == {"any": "v2", "more": "x"}
    assert core.read_namespaced_config_map("plugin-config", "default").data == patched.data
    core.delete_namespaced_config_map("plugin-config", "default")
    assert core.list_namespaced_config_map("default").items == []


def test_missing_object_raises_404_with_the_status_body(api_client: ApiClient) -> None:
    with pytest.raises(ApiException) as caught:
        CoreV1Api(api_client).read_namespaced_pod("nope", "default")
    assert caught.value.status == 404
    status = json.loads(caught.value.body)
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "NotFound", 404)
    assert status["message"] == 'pods "nope" not found'
    assert status["details"] == {"name": "nope", "kind": "pods"}


def test_update_from_a_stale_read_conflicts(api_client: ApiClient) -> None:
    core = CoreV1Api(api_client)
    core.create_namespaced_config_map("default", V1ConfigMap(metadata=V1ObjectMeta(name="cfg")))
    first = core.read_namespaced_config_map("cfg", "default")
    second = core.read_namespaced_config_map("cfg", "default")
    first.data = {"writer": "first"}
    core.replace_namespaced_config_map("cfg", "default", first)
    second.data = {"writer": "second"}
    with pytest.raises(ApiException) as caught:
        core.replace_namespaced_config_map("cfg", "default", second)
    assert caught.value.status == 409
    assert json.loads(caught.value.body)["reason"] == "Conflict"
    assert core.read_namespaced_config_map("cfg", "default").data == {"writer": "first"}


def test_label_and_field_selectors_narrow_lists(
    fake_apiserver: FakeApiServer, api_client: ApiClient
) -> None:
    store = fake_apiserver.store
    store.create(pod("a", node_name="gpu-1", labels={"app": "train", "tier": "gpu"}))
    store.create(pod("b", node_name="gpu-2", labels={"app": "train"}))
    store.create(pod("c", node_name="gpu-1", labels={"app": "serve"}, phase="Pending"))
    core = CoreV1Api(api_client)

    def names(**selectors: str) -> list[str]:
        return [p.metadata.name for p in core.list_pod_for_all_namespaces(**selectors).items]

    assert names(label_selector="app in (train,serve),!tier") == ["b", "c"]
    assert names(field_selector="spec.nodeName=gpu-1") == ["a", "c"]
    assert names(field_selector="spec.nodeName=gpu-1,status.phase!=Pending") == ["a"]
    assert names(label_selector="app=train", field_selector="spec.nodeName=gpu-2") == ["b"]


def test_pagination_walks_every_item_once(
    fake_apiserver: FakeApiServer, api_client: ApiClient
) -> None:
    for index in range(7):
        fake_apiserver.store.create(node(f"gpu-{index}"))
    core = CoreV1Api(api_client)
    page = core.list_node(limit=3)
    assert page.metadata.remaining_item_count == 4
    seen = [n.metadata.name for n in page.items]
    while page.metadata._continue:
        page = core.list_node(limit=3, _continue=page.metadata._continue)
        seen += [n.metadata.name for n in page.items]
    assert seen == [f"gpu-{index}" for index in range(7)]


def test_watch_stream_sees_a_label_change(
    fake_apiserver: FakeApiServer, api_client: ApiClient
) -> None:
    fake_apiserver.store.create(node("gpu-1"))
    core = CoreV1Api(api_client)
    since = core.list_node().metadata.resource_version
    relabel = threading.Timer(
        0.2, fake_apiserver.store.patch, ("nodes", "gpu-1", {"metadata": {"labels": {"x": "y"}}})
    )
    relabel.start()
    stream = watch.Watch()
    events = []
    for event in stream.stream(core.list_node, resource_version=since, timeout_seconds=5):
        events.append(event)
        stream.stop()
    relabel.join()
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("MODIFIED", "gpu-1")]
    assert events[0]["object"].metadata.labels["x"] == "y"


def test_custom_resource_is_served_after_its_crd_is_created(api_client: ApiClient) -> None:
    custom = CustomObjectsApi(api_client)
    args = ("nvidia.com", "v1", "clusterpolicies")
    with pytest.raises(ApiException) as before:
        custom.list_cluster_custom_object(*args)
    assert before.value.status == 404
    ApiextensionsV1Api(api_client).create_custom_resource_definition(cluster_policy_crd())
    policy = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": {"devicePlugin": {"config": {"name": "time-slicing"}}},
    }
    custom.create_cluster_custom_object(*args, policy)
    patch = {"spec": {"devicePlugin": {"config": {"default": "any"}}}}
    patched = custom.patch_cluster_custom_object(*args, "cluster-policy", patch)
    assert patched["spec"]["devicePlugin"]["config"] == {"name": "time-slicing", "default": "any"}
    assert patched["metadata"]["generation"] == 2
    listed = custom.list_cluster_custom_object(*args)
    assert [item["metadata"]["name"] for item in listed["items"]] == ["cluster-policy"]


def test_status_subresource_is_the_only_way_to_change_status(
    fake_apiserver: FakeApiServer, api_client: ApiClient
) -> None:
    fake_apiserver.store.create(node("gpu-1"))
    core = CoreV1Api(api_client)
    gpus = {"status": {"allocatable": {"nvidia.com/gpu": "4"}}}
    core.patch_node("gpu-1", gpus)
    assert "nvidia.com/gpu" not in core.read_node("gpu-1").status.allocatable
    core.patch_node_status("gpu-1", {**gpus, "metadata": {"labels": {"ignored": "yes"}}})
    after = core.read_node("gpu-1")
    assert after.status.allocatable["nvidia.com/gpu"] == "4"
    assert "ignored" not in after.metadata.labels
