"""Discovery documents: what kubectl and clients read to learn which resources exist.

Owns `/version`, `/api` (APIVersions), `/apis` (APIGroupList), `/apis/<group>` (APIGroup)
and the per-version APIResourceLists, built from the registry at request time so CRDs
appear and vanish with their definitions. Always the legacy, unaggregated forms: a client
asking for aggregated discovery (`as=APIGroupDiscoveryList`) falls back to them when the
answer's content type is plain `application/json`. Also a schema-less OpenAPI v3 (what
`kubectl create -f` / `apply` need to choose server-side field validation); no OpenAPI v2.
Must not store objects.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tests.fakes.apiserver.resources import OBJECT_VERBS, STATUS_VERBS, Registry, ResourceType

Doc = dict[str, Any]
SERVER_VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0"}


def version() -> Doc:
    return {
        **SERVER_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.23.4",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def core_versions(server_address: str) -> Doc:
    cidr = {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
    return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [cidr]}


def _group(name: str, versions: list[str]) -> Doc:
    listed = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": listed, "preferredVersion": listed[0]}


def group_list(registry: Registry) -> Doc:
    groups = [_group(g, v) for g, v in registry.groups().items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def group(registry: Registry, name: str) -> Doc | None:
    versions = registry.groups().get(name)
    if not name or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}


def _entries(rtype: ResourceType) -> list[Doc]:
    entry: Doc = {
        "name": rtype.plural,
        "singularName": rtype.singular_name,
        "namespaced": rtype.namespaced,
        "kind": rtype.kind,
        "verbs": list(OBJECT_VERBS),
    }
    if rtype.short_names:
        entry["shortNames"] = list(rtype.short_names)
    if rtype.categories:
        entry["categories"] = list(rtype.categories)
    found = [entry]
    if (rtype.group, rtype.plural) == ("", "pods"):
        log = {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod"}
        found.append({**log, "verbs": ["get"]})
        # kubectl drain looks for this entry (and its kind's group) before it evicts
        evict = {"name": "pods/eviction", "singularName": "", "namespaced": True}
        found.append({**evict, "group": "policy", "version": "v1", "kind": "Eviction",
                      "verbs": ["create"]})  # fmt: skip
    if rtype.has_status:
        found.append(
            {
                "name": f"{rtype.plural}/status",
                "singularName": "",
                "namespaced": rtype.namespaced,
                "kind": rtype.kind,
                "verbs": list(STATUS_VERBS),
            }
        )
    return found


def resource_list(registry: Registry, group_name: str, version_name: str) -> Doc | None:
    """The APIResourceList of one group/version, or None when it is not served."""
    types = [t for t in registry.all() if (t.group, t.version) == (group_name, version_name)]
    if not types:
        return None
    group_version = f"{group_name}/{version_name}" if group_name else version_name
    resources = [e for t in sorted(types, key=lambda t: t.plural) for e in _entries(t)]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


def _group_version_path(rtype: ResourceType) -> str:
    return f"apis/{rtype.group}/{rtype.version}" if rtype.group else f"api/{rtype.version}"


def openapi_v3_root(registry: Registry) -> Doc:
    """The OpenAPI v3 index: one document per served group/version."""
    paths: Doc = {}
    for rtype in registry.all():
        path = _group_version_path(rtype)
        stamp = hashlib.sha256(json.dumps(openapi_v3_group(registry, path)).encode()).hexdigest()
        paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={stamp[:32].upper()}"}
    return {"paths": paths}


def openapi_v3_group(registry: Registry, path: str) -> Doc | None:
    """A schema-less OpenAPI v3 document that says every resource's PATCH accepts
    `fieldValidation`: kubectl then validates on the server (here: not at all) instead of
    needing schemas for client-side validation."""
    types = [t for t in registry.all() if _group_version_path(t) == path]
    if not types:
        return None
    params = [
        {"name": name, "in": "query", "schema": {"type": "string"}}
        for name in ("dryRun", "fieldManager", "fieldValidation")
    ]
    paths: Doc = {}
    for rtype in sorted(types, key=lambda t: t.plural):
        scope = "namespaces/{namespace}/" if rtype.namespaced else ""
        gvk = {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}
        operation = {
            "parameters": params,
            "responses": {"200": {"description": "OK"}},
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk,
        }
        paths[f"/{path}/{scope}{rtype.plural}/{{name}}"] = {"patch": operation}
    info = {"title": "Kubernetes", "version": SERVER_VERSION["gitVersion"]}
    return {"openapi": "3.0.0", "info": info, "paths": paths, "components": {"schemas": {}}}
