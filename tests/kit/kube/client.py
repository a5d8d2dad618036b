"""`KubeClient`: objects by name (`create`, `get`, `list`, `patch`, `delete`, `update`) through
the official kubernetes client's `DynamicClient`, as plain dicts: what a product test arranges
and inspects a cluster with, whichever real API server answers.

Owns only the mapping from (resource name, object name, namespace) to the official client: the
client reads the kubeconfig, speaks HTTP and TLS, discovers what the server serves (its
discovery cache is kept for the life of the `KubeClient`, which a plane builds once, so a
test pays no discovery requests) and raises its `ApiException`, which is handed on as the
kit's `ApiError` with the same code, reason and message. A name the cache does not know (a CRD
a test just made) re-reads the server's groups, then its whole discovery, once. `ByName` is the
by-name surface this class and the kit's watch-fed `ApiStore` (tests/kit/plane/store.py, which
the kit's own controllers keep) share, so a kit helper takes either. Must not watch, retry,
or make a request of its own outside the official client.
"""

from __future__ import annotations

import builtins
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tests.kit.kube.errors import ApiError, from_response

if TYPE_CHECKING:
    from kubernetes.dynamic import DynamicClient, Resource

Obj = dict[str, Any]
PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}
TIMEOUT = 30  # seconds a request may take, as ApiStore's
USER_AGENT = "kubectl-gpu-tests/KubeClient"


class ByName(Protocol):
    """Objects by name on a real API server: what `KubeClient` and `ApiStore` both offer."""

    def create(self, obj: Obj, *, keep_status: bool = True) -> Obj: ...

    def get(self, resource: str, name: str, namespace: str = "") -> Obj: ...

    def list(
        self,
        resource: str,
        namespace: str = "",
        *,
        label_selector: str = "",
        field_selector: str = "",
    ) -> builtins.list[Obj]: ...

    def patch(
        self,
        resource: str,
        name: str,
        body: Any,
        *,
        namespace: str = "",
        patch_type: str = "merge",
        status: bool = False,
    ) -> Obj: ...

    def delete(self, resource: str, name: str, namespace: str = "") -> Obj: ...

    def update(self, obj: Obj) -> Obj: ...

    def update_status(self, obj: Obj) -> Obj: ...


class KubeClient:
    """The official client's `DynamicClient` on `kubeconfig`, by name, answering plain dicts."""

    def __init__(self, kubeconfig: Path, discovery_cache: Path) -> None:
        """`discovery_cache`: the file the official client keeps its discovery in (its
        default, one file per server URL under the system's temporary directory, would outlive
        the server and be read by the next one on the same port)."""
        from kubernetes import config
        from kubernetes.dynamic import DynamicClient

        api = config.new_client_from_config(config_file=str(kubeconfig))
        # its own name in the server's audit log: the CLI under test speaks through the same
        # client, and tests count the CLI's requests by the client's default user agent
        api.user_agent = USER_AGENT
        self._dynamic: DynamicClient = DynamicClient(api, cache_file=str(discovery_cache))
        self._lock = threading.Lock()
        self._by_name: dict[str, Resource] = {}
        self._by_kind: dict[tuple[str, str], Resource] = {}
        self.lookups = 0  # times discovery was read from the server again (a name not known)

    # ---- by name ----------------------------------------------------------------------------

    def create(self, obj: Obj, *, keep_status: bool = True) -> Obj:
        """Create `obj` (namespace from its metadata, else "default"); with `keep_status`, a
        status the server dropped on create is then written through the status subresource."""
        resource = self._for_kind(str(obj.get("apiVersion")), str(obj.get("kind")))
        namespace = _namespace(resource, obj)
        created = self._call("create", resource, body=obj, namespace=namespace)
        status = obj.get("status")
        if keep_status and status and "status" in resource.subresources:
            if created.get("status") != status:
                created = self._call(
                    "patch", resource.subresources["status"], body={"status": status},
                    name=created["metadata"]["name"], namespace=namespace,
                    content_type=PATCH_TYPES["merge"],
                )  # fmt: skip
        return created

    def get(self, resource: str, name: str, namespace: str = "") -> Obj:
        found = self._lookup(resource)
        return self._call("get", found, name=name, namespace=_namespace(found, {}, namespace))

    def list(
        self,
        resource: str,
        namespace: str = "",
        *,
        label_selector: str = "",
        field_selector: str = "",
    ) -> builtins.list[Obj]:
        """Every object of `resource` (in `namespace`, or everywhere); each item carries its
        apiVersion and kind, which a LIST's items lack (the official client adds them)."""
        found = self._lookup(resource)
        answer = self._call(
            "get", found, namespace=namespace if found.namespaced else None,
            label_selector=label_selector or None, field_selector=field_selector or None,
        )  # fmt: skip
        items: builtins.list[Obj] = answer.get("items") or []
        return items

    def update(self, obj: Obj) -> Obj:
        resource = self._for_kind(str(obj.get("apiVersion")), str(obj.get("kind")))
        return self._call("replace", resource, body=obj, namespace=_namespace(resource, obj))

    def update_status(self, obj: Obj) -> Obj:
        resource = self._for_kind(str(obj.get("apiVersion")), str(obj.get("kind")))
        target = resource.subresources.get("status", resource)
        return self._call("replace", target, body=obj, namespace=_namespace(resource, obj))

    def patch(
        self,
        resource: str,
        name: str,
        body: Any,
        *,
        namespace: str = "",
        patch_type: str = "merge",
        status: bool = False,
    ) -> Obj:
        """`patch_type`: merge, strategic or json; `status`: through the status subresource
        (where the resource has one)."""
        found = self._lookup(resource)
        target = found.subresources.get("status", found) if status else found
        return self._call(
            "patch", target, body=body, name=name, namespace=_namespace(found, {}, namespace),
            content_type=PATCH_TYPES[patch_type],
        )  # fmt: skip

    def delete(self, resource: str, name: str, namespace: str = "") -> Obj:
        """Delete; returns the last revision the server answers (a Status for some types)."""
        found = self._lookup(resource)
        return self._call("delete", found, name=name, namespace=_namespace(found, {}, namespace))

    # ---- the official client --------------------------------------------------------------

    def _call(self, verb: str, resource: Resource, **kwargs: Any) -> Obj:
        """One call of the DynamicClient; its `ApiException` becomes the kit's `ApiError`."""
        from kubernetes.client.exceptions import ApiException

        try:
            answer = getattr(self._dynamic, verb)(resource, _request_timeout=TIMEOUT, **kwargs)
        except ApiException as error:
            body = error.body if isinstance(error.body, bytes) else str(error.body or "").encode()
            raise from_response(int(error.status or 0), body) from None
        if isinstance(answer, str):  # not JSON: what the official client hands back as text
            return {"text": answer}
        plain: Obj = answer.to_dict()
        return plain

    def _lookup(self, name: str) -> Resource:
        """The served resource a kubectl-style name (`pods`, `ds`, `clusterpolicies.nvidia.com`)
        means: the core group's before another group's, the preferred version before others."""
        found = self._known(lambda: self._by_name.get(name.lower()))
        if found is None:
            raise ApiError(404, "NotFound", f'the server doesn\'t have a resource type "{name}"')
        return found

    def _for_kind(self, api_version: str, kind: str) -> Resource:
        found = self._known(lambda: self._by_kind.get((api_version, kind)))
        if found is None:
            raise ApiError(400, "BadRequest", f"no kind {kind!r} is served at {api_version!r}")
        return found

    def _known(self, find: Any) -> Resource | None:
        """`find()` in the index; if it misses, once after re-reading the server's groups (a
        new CRD's group), then once after re-reading all of discovery (a new CRD in a group
        already known)."""
        with self._lock:
            found: Resource | None = find()
            if found is not None:
                return found
            for refresh in (self._new_groups, self._dynamic.resources.invalidate_cache):
                self.lookups += 1
                refresh()
                self._index()
                found = find()
                if found is not None:
                    return found
            return None

    def _new_groups(self) -> None:
        """The official client's re-read of /apis: new groups, keeping the cached ones."""
        _ = self._dynamic.resources.api_groups

    def _index(self) -> None:
        from kubernetes.dynamic import ResourceList

        served = [
            r
            for kind in self._dynamic.resources  # every group version's resources, by kind
            for r in kind
            if not isinstance(r, ResourceList)
        ]
        # the core group first, then preferred versions: their names win
        served.sort(key=lambda r: (r.group != "", not r.preferred))
        by_name: dict[str, Resource] = {}
        by_kind: dict[tuple[str, str], Resource] = {}
        for r in served:
            by_kind.setdefault((r.group_version, r.kind), r)
            for n in filter(None, [r.name, r.singular_name, *(r.short_names or [])]):
                by_name.setdefault(n, r)
                if r.group:
                    by_name.setdefault(f"{n}.{r.group}", r)
        self._by_name, self._by_kind = by_name, by_kind


def _namespace(resource: Resource, obj: Obj, namespace: str = "") -> str | None:
    if not resource.namespaced:
        return None
    return namespace or str((obj.get("metadata") or {}).get("namespace") or "") or "default"
