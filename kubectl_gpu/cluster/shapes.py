"""The JSON types the Kubernetes API gives the fields of an object, checked where objects enter.

Owns one check per object read (`Api.get`, every item of `Api.list`): the object metadata every
kind has (API conventions: `metadata` an object, `name`/`namespace` strings, `labels` and
`annotations` maps of strings, `ownerReferences` a list of objects) and the node and pod fields
the commands read most (capacity and allocatable maps of strings, taints, conditions, containers
and their statuses lists of objects; a pod list of 100,000 pays for few fields). A real kube-
apiserver never sends another type; a proxy, a webhook or an aggregated API in between can, and
one value of the wrong type must be an error naming the object and the field, not a crash deep
in a command. Must not decide anything about GPUs, or check a field's value (only its JSON
type).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubectl_gpu.errors import ClusterError

# (path, expected) per resource; "" applies to every resource. `expected` is "object",
# "strings" (an object whose values are strings), "list" (of objects) or "string".
_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "": (
        ("metadata.name", "string"),
        ("metadata.namespace", "string"),
        ("metadata.labels", "strings"),
        ("metadata.annotations", "strings"),
        ("metadata.ownerReferences", "list"),
        ("spec", "object"),
        ("status", "object"),
    ),
    "nodes": (
        ("spec.taints", "list"),
        ("status.capacity", "strings"),
        ("status.allocatable", "strings"),
        ("status.conditions", "list"),
        ("status.nodeInfo", "object"),
    ),
    "pods": (
        ("spec.containers", "list"),
        ("spec.resourceClaims", "list"),
        ("status.containerStatuses", "list"),
    ),
    "daemonsets": (("spec.template", "object"), ("spec.selector", "object")),
}


def problem(resource: str, obj: Any) -> str:
    """What in `obj` (an object of `resource`, a REST plural) has the wrong JSON type, in a
    few words naming the field ("" when nothing does). Cheap where all is well (a 100,000-pod
    list pays about a tenth of its JSON decoding): only present fields are looked at."""
    if not isinstance(obj, dict):
        return f"the object is a JSON {json_type(obj)}"
    metadata = obj.get("metadata", {})
    if metadata.__class__ is not dict:
        return f"metadata is a JSON {json_type(metadata)}, not an object"
    for keys, path, expected in _PLANS.get(resource, _PLANS[""]):
        value: Any = obj
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
            if value is None:
                break
        else:
            wrong = _wrong(value, expected)
            if wrong:
                return f"{path} {wrong}"
    return ""


def name_of(obj: Any) -> str:
    """The object's name for a message, whatever its metadata holds ("" when it has none)."""
    metadata = obj.get("metadata") if isinstance(obj, Mapping) else None
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return name if isinstance(name, str) else ""


def _plans() -> dict[str, tuple[tuple[tuple[str, ...], str, str], ...]]:
    every = _FIELDS[""]
    return {
        resource: tuple(
            (tuple(path.split(".")), path, expected)
            for path, expected in (every if resource == "" else (*every, *fields))
        )
        for resource, fields in _FIELDS.items()
    }


_PLANS = _plans()


def _wrong(value: Any, expected: str) -> str:
    if expected == "string":
        return "" if value.__class__ is str else f"is a JSON {json_type(value)}, not a string"
    if expected == "list":
        if value.__class__ is not list:
            return f"is a JSON {json_type(value)}, not a list"
        for i, entry in enumerate(value):
            if entry.__class__ is not dict:
                return f"[{i}] is a JSON {json_type(entry)}, not an object"
        return ""
    if value.__class__ is not dict:
        return f"is a JSON {json_type(value)}, not an object"
    if expected == "strings":
        for key, entry in value.items():
            if entry.__class__ is not str:
                return f"[{key!r}] is a JSON {json_type(entry)}, not a string"
    return ""


def json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number"}
    return "null" if value is None else names.get(type(value), "number")


def check(resource: list[str], obj: Any, url: str, index: int | None = None) -> None:
    """A field of `obj` of a JSON type the Kubernetes API never sends: an error naming the
    object (its name, or its place in the list) and the field."""
    wrong = problem(resource[0] if resource else "", obj)
    if not wrong:
        return
    kind = resource[0].removesuffix("s") if resource else "object"
    name = name_of(obj)
    place = f"number {index + 1} of the list" if index is not None else "(no name)"
    raise ClusterError(
        f"{kind} {repr(name) if name else place} from GET {url} cannot be read: {wrong}",
        hint="the Kubernetes API never sends that type: something between kubectl gpu "
        "and the API server (a proxy, a webhook, an aggregated API) changed the object; "
        f"look at it with `kubectl get --raw {url}`",
    )


def not_a_list(page: Any) -> str:
    """What a list answer holds instead of a list of objects, in a few words ("" when fine)."""
    if not isinstance(page, dict):
        return f"a JSON {json_type(page)}"
    if not isinstance(page.get("metadata") or {}, dict):
        return f"metadata is a JSON {json_type(page['metadata'])}"
    items = page.get("items") or []
    if not isinstance(items, list):
        return f"items is a JSON {json_type(items)}"
    wrong = [i for i in items if not isinstance(i, dict)]
    return f"an item is a JSON {json_type(wrong[0])}" if wrong else ""
