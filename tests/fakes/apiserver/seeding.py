"""The store's direct API for tests and simulated controllers, by kubectl-style names.

Owns `Store`, the object store with by-name methods: `create(obj)`, `seed(objs)`,
`get("pods", name, namespace=…)`, `list(…)`, `update(obj)`, `update_status(obj)`,
`patch(…)`, `delete(…)`. Each call goes
through the same store methods as HTTP (versions, conflicts, validation, watch events,
subscribers) and returns private copies. Must not bypass the store's lock or semantics;
the only shortcut is `create(keep_status=True)`, the seeding equivalent of create + status.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable
from typing import Any

from tests.fakes.apiserver import errors, patching
from tests.fakes.apiserver.resources import ResourceType
from tests.fakes.apiserver.selectors import parse_fields, parse_labels
from tests.fakes.apiserver.store import ListQuery, ObjectStore

Obj = dict[str, Any]
PATCHERS: dict[str, Callable[[Any, Any], Any]] = {
    "merge": patching.merge_patch,
    "json": patching.json_patch,
    "strategic": patching.strategic_merge,
}


def _namespace(rtype: ResourceType, obj: Obj, namespace: str = "") -> str:
    if not rtype.namespaced:
        return ""
    return namespace or str((obj.get("metadata") or {}).get("namespace") or "") or "default"


class Store(ObjectStore):
    """The object store, addressed by resource name (`pods`, `ds`, `clusterpolicies.nvidia.com`)."""

    def type_of(self, obj: Obj) -> ResourceType:
        """The served type for an object's apiVersion and kind."""
        rtype = self.registry.for_kind(str(obj.get("apiVersion")), str(obj.get("kind")))
        if rtype is None:
            raise errors.bad_request(
                f"no kind {obj.get('kind')!r} is served at {obj.get('apiVersion')!r}"
            )
        return rtype

    def create(self, obj: Obj, *, keep_status: bool = True) -> Obj:
        """Create `obj` (namespace from its metadata, else "default"); status is kept."""
        rtype = self.type_of(obj)
        return self.insert(rtype, _namespace(rtype, obj), obj, keep_status=keep_status).copy()

    def seed(self, objs: Iterable[Obj], *, keep_status: bool = True) -> int:
        """Create many objects (as `create` does) without returning copies; for benchmarks."""
        count = 0
        for obj in objs:
            rtype = self.type_of(obj)
            self.insert(rtype, _namespace(rtype, obj), obj, keep_status=keep_status)
            count += 1
        return count

    def get(self, resource: str, name: str, namespace: str = "") -> Obj:
        rtype = self.registry.lookup(resource)
        return self.read(rtype, _namespace(rtype, {}, namespace), name).copy()

    def list(
        self: Store,
        resource: str,
        namespace: str = "",
        *,
        label_selector: str = "",
        field_selector: str = "",
    ) -> builtins.list[Obj]:
        """Objects of a resource, in one namespace or (namespace "") all of them."""
        rtype = self.registry.lookup(resource)
        query = ListQuery(parse_labels(label_selector), parse_fields(field_selector, rtype))
        namespace = namespace if rtype.namespaced else ""
        return [record.copy() for record in self.query(rtype, namespace, query).items]

    def update(self, obj: Obj) -> Obj:
        """PUT semantics: a stale metadata.resourceVersion raises a 409 ApiError."""
        rtype = self.type_of(obj)
        name = str(obj["metadata"]["name"])
        return self.replace(rtype, _namespace(rtype, obj), name, obj).copy()

    def update_status(self, obj: Obj) -> Obj:
        """PUT to the status subresource: only `status` changes."""
        rtype = self.type_of(obj)
        name = str(obj["metadata"]["name"])
        status_only = rtype.has_status
        return self.replace(
            rtype, _namespace(rtype, obj), name, obj, status_only=status_only
        ).copy()

    def patch(
        self: Store,
        resource: str,
        name: str,
        body: Any,
        *,
        namespace: str = "",
        patch_type: str = "merge",
        status: bool = False,
    ) -> Obj:
        """Patch with `patch_type` merge, json or strategic; `status=True` patches status."""
        rtype = self.registry.lookup(resource)
        patcher = PATCHERS[patch_type]
        return self.modify(
            rtype,
            _namespace(rtype, {}, namespace),
            name,
            lambda current: patcher(current, body),
            status_only=status and rtype.has_status,
        ).copy()

    def delete(self, resource: str, name: str, namespace: str = "") -> Obj:
        """Delete; returns the last revision (still present if finalizers hold it)."""
        rtype = self.registry.lookup(resource)
        record, _ = self.remove(rtype, _namespace(rtype, {}, namespace), name)
        return record.copy()
