"""The bundle's objects on a cluster: where each lives, reading one, and which fields are ours.

Owns the kind → resource table, an object's URL, reading the live object (None when missing),
`Outcome` (what happened to one object, as kubectl apply prints it) and the rule of what we own:
the fields our manifest sets, except a ConfigMap's data, which belongs to `kubectl gpu share`
and `mig apply` once it exists. `merged` is the object to PUT: the live one with our fields
set. Must not write anything (`apply` does).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

from kubectl_gpu import bundle, cluster
from kubectl_gpu.errors import ClusterError

Json = dict[str, Any]
Action = Literal[
    "created", "configured", "unchanged", "deleted", "not found", "cleaned", "kept", "restored"
]
DryRun = Literal["none", "client", "server"]

RESOURCES: dict[str, str] = {
    "Namespace": "namespaces",
    "CustomResourceDefinition": "customresourcedefinitions",
    "ServiceAccount": "serviceaccounts",
    "ClusterRole": "clusterroles",
    "ClusterRoleBinding": "clusterrolebindings",
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "ValidatingAdmissionPolicy": "validatingadmissionpolicies",
    "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
    "ConfigMap": "configmaps",
    "DaemonSet": "daemonsets",
    "Node": "nodes",
    "RuntimeClass": "runtimeclasses",
}
_USER_DATA_KINDS = ("ConfigMap",)  # data written later by `share` / `mig apply`: never reset


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What happened (or, in a dry run, would happen) to one object."""

    kind: str
    namespace: str
    name: str
    action: Action

    @property
    def ref(self) -> str:
        """`daemonset.apps/name` style, as kubectl apply prints it."""
        return f"{self.kind.lower()}/{self.name}"


def url_of(obj: Mapping[str, Any]) -> str:
    kind, namespace, name = bundle.identity(dict(obj))
    return cluster.path(RESOURCES[kind], name, namespace or None)


def collection_of(obj: Mapping[str, Any]) -> str:
    kind, namespace, _ = bundle.identity(dict(obj))
    return cluster.path(RESOURCES[kind], namespace=namespace or None)


def read(api: cluster.Api, obj: Mapping[str, Any]) -> Json | None:
    """The live object, or None when it does not exist."""
    try:
        return api.get(url_of(obj))
    except ClusterError as e:
        if e.status == 404:
            return None
        raise


def owned(obj: Mapping[str, Any]) -> Json:
    """The part of a manifest object we own (and so compare and rewrite)."""
    meta = obj.get("metadata") or {}
    mine: Json = {"metadata": {k: meta[k] for k in ("labels", "annotations") if k in meta}}
    if obj.get("kind") not in _USER_DATA_KINDS:
        mine.update({k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")})
    return mine


def owned_fields_match(live: Any, desired: Mapping[str, Any]) -> bool:
    return contains(live, owned(desired))


def contains(live: Any, want: Any) -> bool:
    """Whether `live` holds everything `want` says; fields the server adds do not count, and
    an empty value matches an absent one (the API server omits zero values)."""
    if isinstance(want, Mapping):
        if not isinstance(live, Mapping):
            return False
        return all(contains(live[k], v) if k in live else _is_empty(v) for k, v in want.items())
    if isinstance(want, list):
        if not isinstance(live, list) or len(live) != len(want):
            return False
        return all(contains(a, b) for a, b in zip(live, want, strict=True))
    return bool(live == want)


def _is_empty(value: Any) -> bool:
    return value in ("", None, False, 0) or value == {} or value == []


def merged(live: Mapping[str, Any], desired: Mapping[str, Any]) -> Json:
    """The object to PUT: the live one (resourceVersion, status, others' labels kept) with our
    fields set as the manifest says."""
    result: Json = copy.deepcopy(dict(live))
    meta = result.setdefault("metadata", {})
    for key, value in owned(desired)["metadata"].items():
        meta[key] = {**(meta.get(key) or {}), **value}
    for key, value in owned(desired).items():
        if key != "metadata":
            result[key] = copy.deepcopy(value)
    return result
