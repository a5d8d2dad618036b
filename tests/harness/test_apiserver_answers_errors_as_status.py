"""Every failure comes back as a real-looking `kind: Status` with the right code and reason."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.apiserver import FakeApiServer, cluster_policy_crd
from tests.fakes.apiserver.rawclient import RawClient

CM = "/api/v1/namespaces/default/configmaps"
STALE = {"metadata": {"name": "cfg", "resourceVersion": "1"}, "data": {"a": "b"}}


@pytest.fixture(autouse=True)
def seeded(fake_apiserver: FakeApiServer) -> None:
    fake_apiserver.store.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cfg", "namespace": "default"},
        }
    )
    fake_apiserver.store.create(cluster_policy_crd())
    fake_apiserver.store.create(
        {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cp"}}
    )


def cm(name: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}}


NO_PATH = "the server could not find the requested resource"
NOT_ALLOWED = "the server does not allow this method on the requested resource"
CONFLICT = (
    'Operation cannot be fulfilled on configmaps "cfg": the object has been modified; '
    "please apply your changes to the latest version and try again"
)
NO_NAME = 'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required'
BAD_NAME = (
    'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": '
    "a lowercase RFC 1123 subdomain"
)
BAD_KEY = 'ConfigMap "x" is invalid: metadata.labels: Invalid value: "bad key": name part must'
BAD_VALUE = (
    'ConfigMap "x" is invalid: metadata.labels: Invalid value: "-v": '
    "a valid label must be an empty string"
)
SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}
CR_PATCH_TYPES = (
    "the body of the request was in an unknown format - accepted media types include: "
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
)
CASES: list[tuple[str, str, Any, int, str, str]] = [
    ("GET", f"{CM}/nope", None, 404, "NotFound", 'configmaps "nope" not found'),
    ("GET", "/apis/apps/v1/namespaces/default/daemonsets/nope", None, 404, "NotFound",
     'daemonsets.apps "nope" not found'),
    ("GET", "/api/v1/gadgets", None, 404, "NotFound", NO_PATH),
    ("GET", "/api/v1/namespaces/default/nodes", None, 404, "NotFound", NO_PATH),
    ("POST", CM, cm("cfg"), 409, "AlreadyExists", 'configmaps "cfg" already exists'),
    ("PUT", f"{CM}/cfg", STALE, 409, "Conflict", CONFLICT),
    ("POST", CM, {"metadata": {}}, 422, "Invalid", NO_NAME),
    ("POST", CM, cm("Bad_Name"), 422, "Invalid", BAD_NAME),
    ("POST", CM, cm("x", labels={"bad key": "v"}), 422, "Invalid", BAD_KEY),
    ("POST", CM, cm("x", labels={"k": "-v"}), 422, "Invalid", BAD_VALUE),
    ("POST", CM, b"{not json", 400, "BadRequest", "couldn't get version/kind; json parse error"),
    ("POST", CM, cm("x", resourceVersion="5"), 400, "BadRequest",
     "resourceVersion should not be set on objects to be created"),
    ("POST", CM, SECRET, 400, "BadRequest",
     "the kind in the data (Secret) does not match the expected kind (ConfigMap)"),
    ("PUT", f"{CM}/cfg", cm("other"), 400, "BadRequest",
     "the name of the object (other) does not match the name on the URL (cfg)"),
    ("POST", CM, cm("x", namespace="kube-system"), 400, "BadRequest",
     "the namespace of the provided object does not match the namespace sent on the request"),
    ("POST", "/api/v1/namespaces/ghost/configmaps", cm("x"), 404, "NotFound",
     'namespaces "ghost" not found'),
    ("POST", f"{CM}/cfg", cm("cfg"), 405, "MethodNotAllowed", NOT_ALLOWED),
    ("PUT", CM, cm("cfg"), 405, "MethodNotAllowed", NOT_ALLOWED),
    ("POST", "/api/v1/configmaps", cm("x"), 405, "MethodNotAllowed", NOT_ALLOWED),
    ("DELETE", "/api/v1/configmaps", None, 405, "MethodNotAllowed", NOT_ALLOWED),
    ("OPTIONS", f"{CM}/cfg", None, 405, "MethodNotAllowed", NOT_ALLOWED),
    ("BREW", f"{CM}/cfg", None, 405, "MethodNotAllowed", NOT_ALLOWED),
    ("PATCH", "/apis/nvidia.com/v1/clusterpolicies/cp", {"spec": {}}, 415, "UnsupportedMediaType",
     CR_PATCH_TYPES),
]  # fmt: skip


@pytest.mark.parametrize(("method", "path", "body", "code", "reason", "message"), CASES)
def test_failure_is_a_status_object(
    raw: RawClient, method: str, path: str, body: Any, code: int, reason: str, message: str
) -> None:
    smp = "application/strategic-merge-patch+json"
    response = raw.request(
        method, path, body, content_type=smp if method == "PATCH" else "application/json"
    )
    status = response.json()
    assert response.status == code
    assert response.headers["Content-Type"] == "application/json"
    assert {k: status[k] for k in ("kind", "apiVersion", "status", "reason", "code")} == {
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code,
    }  # fmt: skip
    assert status["message"].startswith(message)


def test_not_found_and_invalid_carry_details(raw: RawClient) -> None:
    missing = raw.get("/apis/apps/v1/namespaces/default/daemonsets/gone").json()
    assert missing["details"] == {"name": "gone", "group": "apps", "kind": "daemonsets"}
    invalid = raw.request("POST", CM, cm("x", labels={"bad key": "v", "ok": "-"})).json()
    assert invalid["details"]["kind"] == "ConfigMap" and invalid["details"]["name"] == "x"
    assert [c["field"] for c in invalid["details"]["causes"]] == [
        "metadata.labels",
        "metadata.labels",
    ]
    assert invalid["message"].startswith(
        'ConfigMap "x" is invalid: [metadata.labels: Invalid value: "bad key"'
    )


def test_denied_requests_read_like_rbac(fake_apiserver: FakeApiServer, raw: RawClient) -> None:
    fake_apiserver.deny("get", "configmaps", namespace="default")
    fake_apiserver.deny("list", "configmaps")
    fake_apiserver.deny("patch", "nodes/status")
    denied = raw.get(f"{CM}/cfg").json()
    assert (denied["code"], denied["reason"]) == (403, "Forbidden")
    assert denied["message"] == (
        'configmaps "cfg" is forbidden: User "test-user" cannot get resource "configmaps" '
        'in API group "" in the namespace "default"'
    )
    assert raw.get("/api/v1/configmaps").json()["message"] == (
        'configmaps is forbidden: User "test-user" cannot list resource "configmaps" '
        'in API group "" at the cluster scope'
    )
    status_patch = raw.request(
        "PATCH", "/api/v1/nodes/n1/status", {}, content_type="application/merge-patch+json"
    )
    assert status_patch.json()["message"].startswith(
        'nodes "n1" is forbidden: User "test-user" cannot patch resource "nodes/status"'
    )
    assert (
        raw.get("/api/v1/namespaces/kube-system/configmaps").status == 403
    )  # list denied everywhere
    assert (
        raw.get("/api/v1/namespaces/kube-system/configmaps/x").status == 404
    )  # get only in default


def test_an_oversized_body_is_refused(fake_apiserver: FakeApiServer, raw: RawClient) -> None:
    fake_apiserver.max_body = 1024
    response = raw.request("POST", CM, cm("big", annotations={"a": "x" * 4096}))
    assert (response.status, response.json()["reason"]) == (413, "RequestEntityTooLarge")
    assert raw.get(f"{CM}/cfg").status == 200  # the server is still serving
