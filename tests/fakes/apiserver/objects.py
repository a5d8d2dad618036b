"""What the real API server does to an object's metadata on create and update.

Owns the write semantics that do not need the store's lock: apiVersion/kind defaulting and
checks, namespace defaulting from the URL, uid and creationTimestamp, `generateName`,
generation bumps on spec change, status kept apart where a status subresource exists,
stale-resourceVersion conflicts, metadata validation, and the status a new CRD gets.
Functions take and return plain dicts; they must not store anything or assign
resourceVersions (the store does, at commit).
"""

from __future__ import annotations

import datetime as dt
import json
import random
import uuid
from collections.abc import Callable
from typing import Any

from tests.fakes.apiserver import errors
from tests.fakes.apiserver.resources import ResourceType
from tests.fakes.apiserver.validation import metadata_causes

Obj = dict[str, Any]
_SYSTEM_FIELDS = (
    "uid",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the real generator avoids vowels and look-alikes


def now() -> str:
    """RFC 3339 in UTC with second precision, as metav1.Time marshals."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def owned_copy(body: Any) -> Obj:
    """A private copy of a request body; anything not a JSON object is a 400."""
    try:
        copied = json.loads(json.dumps(body))
    except (TypeError, ValueError) as exc:
        raise errors.bad_request(f"the object is not valid JSON: {exc}") from exc
    if not isinstance(copied, dict):
        raise errors.bad_request("the body of the request must be a JSON object")
    if not isinstance(copied.setdefault("metadata", {}), dict):
        raise errors.bad_request("metadata must be an object")
    return copied


def check_type(rtype: ResourceType, obj: Obj) -> None:
    """Default apiVersion and kind from the URL, as the decoder does, or refuse a mismatch."""
    api_version = obj.get("apiVersion") or rtype.api_version
    group = api_version.rpartition("/")[0]
    if group != rtype.group:
        raise errors.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API "
            f"version ({rtype.api_version})"
        )
    kind = obj.get("kind") or rtype.kind
    if kind != rtype.kind:
        raise errors.bad_request(
            f"the kind in the data ({kind}) does not match the expected kind ({rtype.kind})"
        )
    obj["apiVersion"], obj["kind"] = rtype.api_version, kind


def place(rtype: ResourceType, obj: Obj, namespace: str) -> None:
    """Default metadata.namespace from the URL; a different one in the body is a 400."""
    meta = obj["metadata"]
    if not rtype.namespaced:
        meta.pop("namespace", None)
        return
    given = meta.get("namespace")
    if given and given != namespace:
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    meta["namespace"] = namespace


def validate(rtype: ResourceType, obj: Obj) -> None:
    causes = metadata_causes(rtype, obj["metadata"])
    if causes:
        raise errors.invalid(
            rtype.kind, rtype.group, str(obj["metadata"].get("name") or ""), causes
        )


def prepare_create(
    rtype: ResourceType, obj: Obj, namespace: str, taken: Callable[[str], bool], keep_status: bool
) -> Obj:
    """Turn a request body (already an owned copy) into the object to store."""
    check_type(rtype, obj)
    place(rtype, obj, namespace)
    meta = obj["metadata"]
    if meta.get("resourceVersion"):
        raise errors.bad_request("resourceVersion should not be set on objects to be created")
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = _generate_name(str(meta["generateName"]), taken)
    validate(rtype, obj)
    for field in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"):
        meta.pop(field, None)
    meta.pop("generation", None)
    meta.update(uid=str(uuid.uuid4()), creationTimestamp=now())
    if rtype.generation:
        meta["generation"] = 1
    if rtype.has_status and not keep_status:
        obj["status"] = _initial_status(rtype)
    if rtype.storage == ("", "namespaces"):
        obj["status"] = {"phase": "Active"}
    if rtype.storage == ("apiextensions.k8s.io", "customresourcedefinitions"):
        accept_crd(obj)
    return obj


def _generate_name(prefix: str, taken: Callable[[str], bool]) -> str:
    for _ in range(100):
        name = prefix + "".join(random.choices(_NAME_ALPHABET, k=5))
        if not taken(name):
            return name
    raise errors.ApiError(500, "InternalError", f"could not generate a free name for {prefix!r}")


def _initial_status(rtype: ResourceType) -> Obj:
    if rtype.storage == ("", "nodes"):
        return {}
    if rtype.storage == ("", "pods"):
        return {"phase": "Pending"}
    return {}


def _content(rtype: ResourceType, obj: Obj) -> Obj:
    """The part of an object whose change bumps metadata.generation."""
    skip = {"metadata", "status"} if rtype.has_status else {"metadata"}
    return {k: v for k, v in obj.items() if k not in skip}


def prepare_update(
    rtype: ResourceType, old: Obj, body: Obj, name: str, status_only: bool
) -> Obj | None:
    """The object an update stores, or None when nothing would change (no new version)."""
    check_type(rtype, body)
    place(rtype, body, str(old["metadata"].get("namespace") or ""))
    meta, old_meta = body["metadata"], old["metadata"]
    if meta.get("name", name) != name:
        given = meta.get("name")
        raise errors.bad_request(
            f"the name of the object ({given}) does not match the name on the URL ({name})"
        )
    meta.setdefault("name", name)
    given = meta.get("resourceVersion")
    if given and str(given) != old_meta["resourceVersion"]:
        raise errors.conflict(rtype.plural, rtype.group, name)
    new = _merge_side(rtype, old, body, status_only)
    validate(rtype, new)
    new_meta = new["metadata"]
    for field in _SYSTEM_FIELDS:
        new_meta.pop(field, None)
        if field in old_meta:
            new_meta[field] = old_meta[field]
    new_meta.pop("managedFields", None)
    new_meta["resourceVersion"] = old_meta["resourceVersion"]
    if rtype.generation and _content(rtype, new) != _content(rtype, old):
        new_meta["generation"] = int(old_meta.get("generation") or 0) + 1
    if rtype.storage == ("apiextensions.k8s.io", "customresourcedefinitions"):
        _reaccept_crd(old, new)
    return None if new == old else new


def _reaccept_crd(old: Obj, new: Obj) -> None:
    """Re-check a changed CRD; keep its old status (and timestamps) when the names are the same."""
    accept_crd(new)
    previous = old.get("status") or {}
    if previous.get("acceptedNames") == new["status"]["acceptedNames"]:
        new["status"] = previous


def _merge_side(rtype: ResourceType, old: Obj, body: Obj, status_only: bool) -> Obj:
    """A status write changes only status; a main write leaves a subresource status alone."""
    if status_only:
        new: Obj = json.loads(json.dumps(old))
        _set_or_drop(new, "status", body.get("status"))
        return new
    if rtype.has_status:
        _set_or_drop(body, "status", old.get("status"))
    return body


def _set_or_drop(obj: Obj, key: str, value: Any) -> None:
    if value is None:
        obj.pop(key, None)
    else:
        obj[key] = value


def accept_crd(crd: Obj) -> None:
    """Check a CRD's naming and give it the status of an established definition."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    name = str(crd["metadata"].get("name") or "")
    causes = [
        (f"spec.{path}", "FieldValueRequired", "Required value")
        for path, value in (
            ("group", spec.get("group")),
            ("names.plural", names.get("plural")),
            ("names.kind", names.get("kind")),
            ("versions", spec.get("versions")),
        )
        if not value
    ]
    expected = f"{names.get('plural')}.{spec.get('group')}"
    if not causes and name != expected:
        message = f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'
        causes.append(("metadata.name", "FieldValueInvalid", message))
    if causes:
        raise errors.invalid("CustomResourceDefinition", "apiextensions.k8s.io", name, causes)
    accepted = dict(names, singular=names.get("singular") or names["kind"].lower())
    accepted.setdefault("listKind", f"{names['kind']}List")
    stored = [v["name"] for v in spec["versions"] if v.get("storage")] or [
        spec["versions"][0]["name"]
    ]
    crd["status"] = {
        "acceptedNames": accepted,
        "storedVersions": stored,
        "conditions": [
            {"type": t, "status": "True", "reason": r, "message": m, "lastTransitionTime": now()}
            for t, r, m in (
                ("NamesAccepted", "NoConflicts", "no conflicts found"),
                ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
            )
        ],
    }
