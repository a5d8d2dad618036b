"""Discovery: built-in groups and short names, CRD groups appearing and vanishing."""

from __future__ import annotations

from typing import Any

from tests.fakes.apiserver import FakeApiServer, cluster_policy_crd
from tests.fakes.apiserver.rawclient import RawClient

AGGREGATED = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)


def resources(raw: RawClient, path: str) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in raw.get(path).json()["resources"]}


def test_core_resources_have_kubectls_short_names_and_scopes(raw: RawClient) -> None:
    core = resources(raw, "/api/v1")
    assert {n: core[n]["shortNames"] for n in ("nodes", "pods", "configmaps", "namespaces")} == {
        "nodes": ["no"], "pods": ["po"], "configmaps": ["cm"], "namespaces": ["ns"],
    }  # fmt: skip
    assert (core["nodes"]["namespaced"], core["pods"]["namespaced"]) == (False, True)
    assert core["pods/status"]["verbs"] == ["get", "patch", "update"]
    assert "watch" in core["pods"]["verbs"] and core["pods"]["kind"] == "Pod"
    apps = resources(raw, "/apis/apps/v1")
    assert apps["daemonsets"]["shortNames"] == ["ds"] and "daemonsets/status" in apps


def test_group_list_names_every_builtin_group(raw: RawClient) -> None:
    groups = {g["name"]: g for g in raw.get("/apis").json()["groups"]}
    for name in ("apps", "rbac.authorization.k8s.io", "apiextensions.k8s.io",
                 "admissionregistration.k8s.io", "resource.k8s.io"):  # fmt: skip
        assert groups[name]["preferredVersion"] == {"groupVersion": f"{name}/v1", "version": "v1"}
    assert "nvidia.com" not in groups
    dra = resources(raw, "/apis/resource.k8s.io/v1")
    assert (dra["resourceclaims"]["namespaced"], dra["resourceslices"]["namespaced"]) == (
        True,
        False,
    )
    policies = resources(raw, "/apis/admissionregistration.k8s.io/v1")
    assert {"validatingadmissionpolicies", "validatingadmissionpolicybindings"} <= set(policies)


def test_aggregated_discovery_requests_get_the_plain_documents(raw: RawClient) -> None:
    for path, kind in (("/api", "APIVersions"), ("/apis", "APIGroupList")):
        response = raw.get(path, Accept=AGGREGATED)
        assert response.headers["Content-Type"] == "application/json"
        assert response.json()["kind"] == kind


def test_a_crd_adds_its_group_and_removing_it_takes_it_away(
    fake_apiserver: FakeApiServer, raw: RawClient
) -> None:
    assert raw.get("/apis/nvidia.com/v1").status == 404
    fake_apiserver.store.create(cluster_policy_crd())
    assert "nvidia.com" in {g["name"] for g in raw.get("/apis").json()["groups"]}
    policy = resources(raw, "/apis/nvidia.com/v1")["clusterpolicies"]
    assert (policy["kind"], policy["namespaced"], policy["singularName"]) == (
        "ClusterPolicy",
        False,
        "clusterpolicy",
    )
    assert "clusterpolicies/status" in resources(raw, "/apis/nvidia.com/v1")
    assert "apis/nvidia.com/v1" in raw.get("/openapi/v3").json()["paths"]
    fake_apiserver.store.delete("crds", "clusterpolicies.nvidia.com")
    assert "nvidia.com" not in {g["name"] for g in raw.get("/apis").json()["groups"]}
    assert raw.get("/apis/nvidia.com/v1").status == 404


def test_version_and_health(raw: RawClient) -> None:
    version = raw.get("/version").json()
    assert (version["major"], version["minor"]) == ("1", "32") and version["gitVersion"].startswith(
        "v1.32"
    )
    assert raw.get("/healthz").body == b"ok"
    openapi_v2 = raw.get("/openapi/v2")  # an empty protobuf document: no client-side schemas
    assert (openapi_v2.status, openapi_v2.body) == (200, b"")
    assert openapi_v2.headers["Content-Type"].endswith("+protobuf")
