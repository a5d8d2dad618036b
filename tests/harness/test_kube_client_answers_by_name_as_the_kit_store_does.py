"""`KubeClient`, the by-name facade product tests use over the official kubernetes client,
answers as the kit's own `ApiStore` does on a real kube-apiserver (the same calls, the same
plain dicts, the same `ApiError` code, reason and message), finds a CRD made after it read
discovery, and reads discovery again only then. It names itself in the server's audit log,
apart from the CLI, which speaks through the same client (tests/cli/clirequests.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import eventually
from tests.kit.kube import ApiError
from tests.kit.kube.client import USER_AGENT, ByName, KubeClient
from tests.kit.kube.objects import custom_resource_definition, node
from tests.kit.plane import ControlPlane, sharedplane
from tests.kit.plane.store import ApiStore

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(params=["official-client", "apistore"])
def by_name(request: pytest.FixtureRequest, control_plane: ControlPlane) -> Iterator[ByName]:
    assert control_plane.creds is not None
    store = ApiStore(
        control_plane.url, control_plane.creds.admin_token, control_plane.creds.ca_cert
    )
    try:
        yield control_plane.client if request.param == "official-client" else store
    finally:
        store.close()
        sharedplane.reset()


def test_crud_by_short_names_and_patch_types(by_name: ByName) -> None:
    by_name.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t-byname"}})
    by_name.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "1", "b": "2"},
         "metadata": {"name": "c", "namespace": "t-byname", "labels": {"k": "v"}}}
    )  # fmt: skip
    assert by_name.get("cm", "c", "t-byname")["data"] == {"a": "1", "b": "2"}
    by_name.patch("configmaps", "c", {"data": {"a": None}}, namespace="t-byname")
    by_name.patch(
        "configmap", "c", [{"op": "add", "path": "/data/z", "value": "9"}],
        namespace="t-byname", patch_type="json",
    )  # fmt: skip
    assert by_name.get("configmaps", "c", "t-byname")["data"] == {"b": "2", "z": "9"}
    [listed] = by_name.list("cm", "t-byname", field_selector="metadata.name=c")
    assert (listed["apiVersion"], listed["kind"]) == ("v1", "ConfigMap")
    assert [c["metadata"]["name"] for c in by_name.list("cm", label_selector="k=v")] == ["c"]
    by_name.delete("cm", "c", "t-byname")
    with pytest.raises(ApiError) as missing:
        by_name.get("cm", "c", "t-byname")
    assert (missing.value.code, missing.value.reason) == (404, "NotFound")
    assert missing.value.message == 'configmaps "c" not found'
    with pytest.raises(ApiError) as unknown:
        by_name.get("no-such-things", "c")
    assert (unknown.value.code, unknown.value.reason) == (404, "NotFound")
    assert unknown.value.message == 'the server doesn\'t have a resource type "no-such-things"'


def test_status_is_kept_on_create_and_patched_through_its_subresource(by_name: ByName) -> None:
    created = by_name.create(node("t-byname-node"))
    assert created["status"]["capacity"]["cpu"] == "8"
    by_name.patch(
        "no", "t-byname-node", {"status": {"capacity": {"nvidia.com/gpu": "4"}}}, status=True
    )
    assert by_name.get("nodes", "t-byname-node")["status"]["capacity"]["nvidia.com/gpu"] == "4"
    stale = dict(created)
    stale["metadata"] = {**created["metadata"], "labels": {"x": "y"}}
    with pytest.raises(ApiError) as conflict:
        by_name.update(stale)
    assert (conflict.value.code, conflict.value.reason) == (409, "Conflict")
    with pytest.raises(ApiError) as exists:
        by_name.create(node("t-byname-node"))
    assert (exists.value.code, exists.value.reason) == (409, "AlreadyExists")


def test_a_crd_made_later_is_found_and_known_names_cost_no_discovery(
    control_plane: ControlPlane,
) -> None:
    client: KubeClient = control_plane.client
    try:
        client.get("namespaces", "default")
        known = client.lookups
        for _ in range(20):
            client.list("pods", "default")
        assert client.lookups == known  # discovery was not read again for names it knows
        for kind, plural in (("Widget", "widgets"), ("Gadget", "gadgets")):  # one group, twice
            client.create(custom_resource_definition("t-byname.example.com", kind, plural))
            thing = {"apiVersion": "t-byname.example.com/v1", "kind": kind,
                     "metadata": {"name": "one"}, "spec": {"size": 3}}  # fmt: skip
            assert eventually(lambda thing=thing: _created(client, thing), 20)
            assert client.get(f"{plural}.t-byname.example.com", "one")["spec"] == {"size": 3}
        assert client.lookups > known
    finally:
        sharedplane.reset()


def _created(client: KubeClient, obj: dict[str, object]) -> bool:
    try:
        client.create(obj)
        return True
    except ApiError as error:  # the CRD is served a moment after it is made
        if error.code not in (400, 404):
            raise
        return False


def test_its_requests_are_not_taken_for_the_clis(control_plane: ControlPlane) -> None:
    start = len(control_plane.audit())
    control_plane.client.get("namespaces", "kube-system")
    agents = {
        str(e.get("userAgent"))
        for e in control_plane.audit()[start:]
        if e.get("requestURI") == "/api/v1/namespaces/kube-system"
    }
    assert agents == {USER_AGENT}
