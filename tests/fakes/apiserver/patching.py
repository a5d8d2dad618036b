"""The three PATCH formats kubectl and the Python client send, applied to plain dicts.

Owns JSON merge patch (RFC 7386), JSON patch (RFC 6902, including `test`, `move`, `copy`)
and the subset of strategic merge patch our tools and kubectl produce: maps merge, lists of
objects merge by their Kubernetes merge key (`name`, `containerPort`, `mountPath`, …),
`$patch: delete|replace`, `$deleteFromPrimitiveList/…`, `$setElementOrder/…` and
`$retainKeys` are honoured or dropped. Failures raise `ApiError`. Must not touch metadata
semantics (resourceVersion, generation): the store does.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.fakes.apiserver import errors

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

# patchMergeKey of the list fields we meet, from the Kubernetes API types.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "resourceClaims": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "hostAliases": "ip",
    "conditions": "type",
    "taints": "key",
    "ownerReferences": "uid",
    "topologySpreadConstraints": "topologyKey",
}
# Lists of scalars that strategic merge unites instead of replacing.
MERGED_SCALAR_LISTS = {"finalizers"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise errors.bad_request(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], path: str) -> tuple[Any, str]:
    node = doc
    for part in parts[:-1]:
        node = _child(node, part, path)
    return node, parts[-1]


def _child(node: Any, part: str, path: str) -> Any:
    if isinstance(node, dict) and part in node:
        return node[part]
    if isinstance(node, list) and part.isdigit() and int(part) < len(node):
        return node[int(part)]
    raise errors.unprocessable(f"doc is missing path: {path!r}: missing value")


def _get(doc: Any, path: str) -> Any:
    node = doc
    for part in _pointer(path):
        node = _child(node, part, path)
    return node


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    node, last = _parent(doc, parts, path)
    if isinstance(node, dict):
        node[last] = value
    elif isinstance(node, list) and (last == "-" or (last.isdigit() and int(last) <= len(node))):
        node.insert(len(node) if last == "-" else int(last), value)
    else:
        raise errors.unprocessable(f"add operation does not apply: doc is missing path: {path!r}")
    return doc


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    node, last = _parent(doc, parts, path)
    _child(node, last, path)  # raises when absent
    if isinstance(node, dict):
        del node[last]
    else:
        del node[int(last)]
    return doc


def _apply_op(doc: Any, op: dict[str, Any]) -> Any:
    kind, path = op.get("op"), op.get("path")
    if not isinstance(path, str):
        raise errors.bad_request(f"JSON patch operation is missing a path: {op}")
    if kind == "add":
        return _add(doc, path, copy.deepcopy(op.get("value")))
    if kind == "remove":
        return _remove(doc, path)
    if kind == "replace":
        _get(doc, path)
        return _add(_remove(doc, path), path, copy.deepcopy(op.get("value")))
    if kind in ("move", "copy"):
        value = copy.deepcopy(_get(doc, str(op.get("from"))))
        if kind == "move":
            doc = _remove(doc, str(op.get("from")))
        return _add(doc, path, value)
    if kind == "test":
        if _get(doc, path) != op.get("value"):
            raise errors.unprocessable(f"testing value {path} failed: test failed")
        return doc
    raise errors.bad_request(f"Unexpected kind: {kind}")


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902, all-or-nothing: the target is copied first."""
    if not isinstance(operations, list) or not all(isinstance(o, dict) for o in operations):
        raise errors.bad_request(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
        )
    doc = copy.deepcopy(target)
    for op in operations:
        doc = _apply_op(doc, op)
    return doc


def strategic_merge(target: Any, patch: Any, field: str = "") -> Any:
    """Strategic merge patch as the Kubernetes built-in types define it (see module doc)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        _merge_key(result, key, value)
    retained = patch.get("$retainKeys")
    if isinstance(retained, list):
        result = {k: v for k, v in result.items() if k in retained or k in patch}
    return result


def _merge_key(result: dict[str, Any], key: str, value: Any) -> None:
    if key.startswith("$deleteFromPrimitiveList/"):
        name = key.split("/", 1)[1]
        result[name] = [v for v in result.get(name) or [] if v not in value]
    elif key.startswith("$"):
        return  # $setElementOrder and $retainKeys order or prune; handled by the caller
    elif value is None:
        result.pop(key, None)
    elif isinstance(value, list):
        result[key] = _merge_list(result.get(key), value, key)
    else:
        merged = strategic_merge(result.get(key), value, key)
        if merged is None:
            result.pop(key, None)
        else:
            result[key] = merged


def _merge_list(target: Any, patch: list[Any], field: str) -> list[Any]:
    current = list(target) if isinstance(target, list) else []
    if field in MERGED_SCALAR_LISTS:
        return current + [v for v in patch if v not in current]
    key = MERGE_KEYS.get(field)
    if key is None and patch and all(isinstance(i, dict) and "name" in i for i in patch):
        key = "name"  # our own CR lists of named objects merge like containers do
    if key is None or not all(isinstance(i, dict) for i in patch):
        return [strategic_merge(None, i) for i in patch if not _is_directive(i)]
    return _merge_keyed(current, patch, key, field)


def _is_directive(item: Any) -> bool:
    return isinstance(item, dict) and "$patch" in item and len(item) == 1


def _merge_keyed(current: list[Any], patch: list[Any], key: str, field: str) -> list[Any]:
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [strategic_merge(None, i) for i in patch if not _is_directive(i)]
    result = list(current)
    for item in patch:
        wanted = item.get(key)
        index = next(
            (n for n, old in enumerate(result) if isinstance(old, dict) and old.get(key) == wanted),
            None,
        )
        if item.get("$patch") == "delete":
            result = [r for r in result if not (isinstance(r, dict) and r.get(key) == wanted)]
        elif index is None:
            result.append(strategic_merge(None, item, field))
        else:
            result[index] = strategic_merge(result[index], item, field)
    return result
