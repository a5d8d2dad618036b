"""REST routing: from method, path, query and body to a store call and a JSON answer.

Owns the URL grammar (`/api/v1/namespaces/<ns>/<resource>/<name>/<subresource>`,
`/apis/<group>/<version>/…`, the legacy `/watch/` prefix), the verb each request means,
query handling (selectors, `limit`/`continue`, `dryRun`, watch parameters), body decoding
and the choice of patch format. Must not touch sockets: the server turns `Reply` into
bytes on the wire and runs watch streams.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from tests.fakes.apiserver import discovery, errors, patching, protobuf, tables
from tests.fakes.apiserver.records import Change
from tests.fakes.apiserver.resources import Registry, ResourceType
from tests.fakes.apiserver.selectors import FieldTerm, parse_fields, parse_labels
from tests.fakes.apiserver.store import ListPage, ListQuery, ObjectStore
from tests.fakes.apiserver.watch import Pacing, Watcher

_SUBRESOURCES = ("status",)
_BUILTIN_PATCHES = {
    patching.MERGE_PATCH: patching.merge_patch,
    patching.JSON_PATCH: patching.json_patch,
    patching.STRATEGIC_PATCH: patching.strategic_merge,
}
_CR_PATCH_TYPES = [patching.JSON_PATCH, patching.MERGE_PATCH, patching.APPLY_PATCH]


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    content_type: str
    body: bytes
    accept: str = "application/json"


@dataclass(frozen=True)
class Target:
    """The object or collection a resource request addresses."""

    rtype: ResourceType
    namespace: str  # "" for cluster-scoped resources and all-namespace collections
    name: str
    subresource: str
    watch_prefix: bool = False

    def verb(self, method: str, query: dict[str, str]) -> str:
        """The RBAC verb, or "" when this method is not allowed on this path."""
        watching = self.watch_prefix or query.get("watch") in ("true", "1")
        by_method = {
            "GET": "get" if self.name and not watching else "watch" if watching else "list",
            "POST": "create" if not self.name else "",
            "PUT": "update" if self.name else "",
            "PATCH": "patch" if self.name else "",
            "DELETE": "delete" if self.name else "deletecollection",
        }
        verb = by_method.get(method, "")
        if self.rtype.namespaced and not self.namespace and verb not in ("list", "watch"):
            return ""  # across all namespaces a namespaced resource can only be read
        return "" if self.subresource and verb not in ("get", "update", "patch") else verb

    def access(self, verb: str) -> dict[str, str]:
        resource = self.rtype.plural + (f"/{self.subresource}" if self.subresource else "")
        where = self.namespace if self.rtype.namespaced else ""
        return dict(
            verb=verb, resource=resource, group=self.rtype.group, namespace=where, name=self.name
        )


@dataclass
class Reply:
    code: int
    body: bytes = b""
    content_type: str = "application/json"
    watcher: Watcher | None = None
    pacing: Pacing | None = None


def json_reply(doc: Any, code: int = 200) -> Reply:
    return Reply(code, json.dumps(doc).encode())


def discovery_reply(store: ObjectStore, parts: list[str], server_address: str) -> Reply | None:
    """Answer version, health and discovery paths; None for anything else."""
    if parts in (["healthz"], ["livez"], ["readyz"]):
        return Reply(200, b"ok", "text/plain")
    build = _discovery_document(store.registry, parts, server_address)
    if build is None:
        return None
    doc = build()
    if doc is None:
        raise errors.path_not_found()
    return json_reply(doc)


def _discovery_document(
    registry: Registry, parts: list[str], address: str
) -> Callable[[], dict[str, Any] | None] | None:
    fixed: dict[tuple[str, ...], Callable[[], dict[str, Any] | None]] = {
        ("version",): discovery.version,
        ("api",): lambda: discovery.core_versions(address),
        ("api", "v1"): lambda: discovery.resource_list(registry, "", "v1"),
        ("apis",): lambda: discovery.group_list(registry),
        ("openapi", "v3"): lambda: discovery.openapi_v3_root(registry),
    }
    if tuple(parts) in fixed:
        return fixed[tuple(parts)]
    if parts[0] == "apis" and len(parts) == 2:
        return lambda: discovery.group(registry, parts[1])
    if parts[0] == "apis" and len(parts) == 3:
        return lambda: discovery.resource_list(registry, parts[1], parts[2])
    if parts[:2] == ["openapi", "v3"]:
        return lambda: discovery.openapi_v3_group(registry, "/".join(parts[2:]))
    return None


def resolve(store: ObjectStore, parts: list[str]) -> Target:
    """Map a resource path to its target, or raise a 404 for paths no server serves."""
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) > 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise errors.path_not_found()
    watch_prefix = rest[:1] == ["watch"]
    rest = rest[1:] if watch_prefix else rest
    namespace = ""
    if rest[:1] == ["namespaces"] and len(rest) >= 3 and rest[2] not in _SUBRESOURCES:
        namespace, rest = rest[1], rest[2:]
    rtype = store.registry.get(group, version, rest[0]) if rest else None
    if rtype is None or len(rest) > 3 or (namespace and not rtype.namespaced):
        raise errors.path_not_found()
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if (name and rtype.namespaced and not namespace) or (
        sub and not (sub == "status" and rtype.has_status)
    ):
        raise errors.path_not_found()
    return Target(rtype, namespace, name, sub, watch_prefix)


_BODY_TYPES = ("", "application/json", "application/yaml", "*/*")


def decode(request: Request, *, allow_yaml: bool = True) -> Any:
    """The request body as data; undecodable bodies are a 400 as on the real server."""
    if request.content_type == protobuf.MEDIA_TYPE and request.method in ("POST", "PUT"):
        return protobuf.decode(request.body)
    if request.method in ("POST", "PUT") and request.content_type not in _BODY_TYPES:
        raise errors.unsupported_media_type(
            request.content_type, ["application/json", "application/yaml"]
        )
    text = request.body.decode("utf-8", errors="replace")
    try:
        if allow_yaml and request.content_type in ("application/yaml", patching.APPLY_PATCH):
            return yaml.safe_load(text)
        return json.loads(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise errors.bad_request(f"couldn't get version/kind; json parse error: {exc}") from exc


class Router:
    """Runs one resource request against the store."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._verbs: dict[str, Callable[[Target, Request], Reply]] = {
            "get": self._get,
            "list": self._list,
            "watch": self._watch,
            "create": self._create,
            "update": self._update,
            "patch": self._patch,
            "delete": self._delete,
            "deletecollection": self._delete_collection,
        }

    def handle(self, target: Target, verb: str, request: Request) -> Reply:
        return self._verbs[verb](target, request)

    def _get(self, target: Target, request: Request) -> Reply:
        record = self.store.read(target.rtype, target.namespace, target.name)
        if tables.wants_table(request.accept):
            meta = {"resourceVersion": record.obj["metadata"]["resourceVersion"]}
            include = request.query.get("includeObject", "Metadata")
            return json_reply(tables.table(target.rtype, [record], meta, include))
        return Reply(200, record.raw)

    def _list(self, target: Target, request: Request) -> Reply:
        query = ListQuery(
            parse_labels(request.query.get("labelSelector", "")),
            parse_fields(request.query.get("fieldSelector", ""), target.rtype),
            _int(request.query.get("limit")),
            request.query.get("continue", ""),
        )
        page = self.store.query(target.rtype, target.namespace, query)
        if tables.wants_table(request.accept):
            include = request.query.get("includeObject", "Metadata")
            meta = json.loads(list_body(target.rtype, ListPage([], page.rv, page.continue_token)))
            return json_reply(tables.table(target.rtype, page.items, meta["metadata"], include))
        return Reply(200, list_body(target.rtype, page))

    def _watch(self, target: Target, request: Request) -> Reply:
        query = request.query
        fields = parse_fields(query.get("fieldSelector", ""), target.rtype)
        if target.name:  # watching one object by URL is a name field selector
            fields += (FieldTerm("metadata.name", target.name, False),)
        labels = parse_labels(query.get("labelSelector", ""))
        render = _table_events(target.rtype) if tables.wants_table(request.accept) else None
        watcher = Watcher(target.rtype, target.namespace, labels, fields, render)
        initial = query.get("sendInitialEvents") == "true"
        self.store.watch(watcher, "" if initial else query.get("resourceVersion", ""))
        if initial:
            watcher.send(_initial_events_end(self.store.bookmark(target.rtype)))
        bookmarks = 1.0 if query.get("allowWatchBookmarks") == "true" else None
        timeout = float(_int(query.get("timeoutSeconds"))) or None
        return Reply(200, watcher=watcher, pacing=Pacing(timeout, bookmarks))

    def _create(self, target: Target, request: Request) -> Reply:
        record = self.store.insert(
            target.rtype, target.namespace, decode(request), dry_run=_dry(request)
        )
        return Reply(201, record.raw)

    def _update(self, target: Target, request: Request) -> Reply:
        status_only = target.subresource == "status"
        record = self.store.replace(
            target.rtype, target.namespace, target.name, decode(request),
            status_only=status_only, dry_run=_dry(request),
        )  # fmt: skip
        return Reply(200, record.raw)

    def _patch(self, target: Target, request: Request) -> Reply:
        patch = decode(request, allow_yaml=request.content_type == patching.APPLY_PATCH)
        if request.content_type == patching.APPLY_PATCH:
            return self._apply(target, request, patch)
        patcher = _BUILTIN_PATCHES.get(request.content_type)
        if patcher is None or (target.rtype.crd and patcher is patching.strategic_merge):
            raise errors.unsupported_media_type(request.content_type, _accepted_patches(target))
        record = self.store.modify(
            target.rtype, target.namespace, target.name, lambda current: patcher(current, patch),
            status_only=target.subresource == "status", dry_run=_dry(request),
        )  # fmt: skip
        return Reply(200, record.raw)

    def _apply(self, target: Target, request: Request, patch: Any) -> Reply:
        """Server-side apply, approximated: create when absent, else a strategic merge."""
        merge = patching.merge_patch if target.rtype.crd else patching.strategic_merge
        try:
            record = self.store.modify(
                target.rtype, target.namespace, target.name, lambda current: merge(current, patch),
                status_only=target.subresource == "status", dry_run=_dry(request),
            )  # fmt: skip
            return Reply(200, record.raw)
        except errors.ApiError as exc:
            if exc.code != 404 or target.subresource:
                raise
        created = self.store.insert(target.rtype, target.namespace, patch, dry_run=_dry(request))
        return Reply(201, created.raw)

    def _delete(self, target: Target, request: Request) -> Reply:
        options = _delete_options(request)
        dry_run = _dry(request) or "All" in (options.get("dryRun") or [])
        record, gone = self.store.remove(
            target.rtype, target.namespace, target.name,
            preconditions=options.get("preconditions"), dry_run=dry_run,
        )  # fmt: skip
        if not gone or target.rtype.returns_deleted:
            return Reply(200 if gone else 202, record.raw)
        meta = record.obj["metadata"]
        details = {"name": target.name, "group": target.rtype.group, "kind": target.rtype.plural}
        details["uid"] = meta.get("uid")
        return json_reply(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": details,
            }
        )

    def _delete_collection(self, target: Target, request: Request) -> Reply:
        page = self.store.query(target.rtype, target.namespace, _selection(target, request))
        deleted = ListPage([], self.store.resource_version)
        for record in page.items:
            meta = record.obj["metadata"]
            namespace = str(meta.get("namespace") or "")
            deleted.items.append(self.store.remove(target.rtype, namespace, meta["name"])[0])
        return Reply(200, list_body(target.rtype, deleted))


def _table_events(rtype: ResourceType) -> Callable[[Change, str], bytes]:
    first = [True]  # only the first event of a stream carries the column definitions

    def render(change: Change, event_type: str) -> bytes:
        line = tables.watch_line(rtype, event_type, change.record, first=first[0])
        first[0] = False
        return line

    return render


def _delete_options(request: Request) -> dict[str, Any]:
    """DeleteOptions from a DELETE body; a protobuf one is ignored (nothing we honour is lost
    but preconditions, which kubectl does not send)."""
    if not request.body.strip() or request.content_type == protobuf.MEDIA_TYPE:
        return {}
    options = decode(request)
    if not isinstance(options, dict):
        raise errors.bad_request("DeleteOptions must be a JSON object")
    return options


def _selection(target: Target, request: Request) -> ListQuery:
    return ListQuery(
        parse_labels(request.query.get("labelSelector", "")),
        parse_fields(request.query.get("fieldSelector", ""), target.rtype),
    )


def _accepted_patches(target: Target) -> list[str]:
    return _CR_PATCH_TYPES if target.rtype.crd else [patching.STRATEGIC_PATCH, *_CR_PATCH_TYPES]


def _dry(request: Request) -> bool:
    return request.query.get("dryRun") == "All"


def _int(text: str | None) -> int:
    try:
        return max(0, int(text or 0))
    except ValueError as exc:
        raise errors.bad_request(f"invalid integer {text!r}") from exc


def _initial_events_end(bookmark: bytes) -> bytes:
    event = json.loads(bookmark)
    event["object"]["metadata"]["annotations"] = {"k8s.io/initial-events-end": "true"}
    return json.dumps(event).encode() + b"\n"


def list_body(rtype: ResourceType, page: ListPage) -> bytes:
    """A `<Kind>List` whose items are the stored bytes, joined rather than re-encoded."""
    meta: dict[str, Any] = {"resourceVersion": str(page.rv)}
    if page.continue_token:
        meta["continue"] = page.continue_token
    if page.remaining is not None:
        meta["remainingItemCount"] = page.remaining
    head = {"kind": rtype.list_kind_name, "apiVersion": rtype.api_version, "metadata": meta}
    prefix = json.dumps(head)[:-1].encode() + b',"items":['
    return b"".join((prefix, b",".join(r.raw for r in page.items), b"]}"))
