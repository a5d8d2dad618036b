"""The API server's discovery as the test kit reads it: kubectl-style names (`pods`, `ds`,
`clusterpolicies.nvidia.com`) and (apiVersion, kind) pairs to the served resource (`Api`, the
preferred version), reloaded from /api and /apis when a name is not (yet) known (a CRD just
made). Must not make requests itself: it is handed a GET."""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.kit.kube import ApiError


@dataclass(frozen=True)
class Api:
    """One served resource, as discovery describes it (the preferred version)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    has_status: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str = "", name: str = "", sub: str = "") -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{urllib.parse.quote(namespace)}"
        base += f"/{self.plural}"
        if name:
            base += f"/{urllib.parse.quote(name)}"
        if sub:
            base += f"/{sub}"
        return base


class Discovery:
    """Names to `Api`s, from /api and /apis; reloaded when a name is not (yet) known."""

    def __init__(self, get: Callable[[str], Any]) -> None:
        self._get = get
        self._lock = threading.Lock()
        self._by_name: dict[str, Api] = {}
        self._by_kind: dict[tuple[str, str], Api] = {}

    def lookup(self, name: str) -> Api:
        found = self._find(name)
        if found is None:
            self.reload()
            found = self._find(name)
        if found is None:
            raise ApiError(404, "NotFound", f'the server doesn\'t have a resource type "{name}"')
        return found

    def for_kind(self, api_version: str, kind: str) -> Api:
        key = (api_version, kind)
        with self._lock:
            found = self._by_kind.get(key)
        if found is None:
            self.reload()
            with self._lock:
                found = self._by_kind.get(key)
        if found is None:
            raise ApiError(400, "BadRequest", f"no kind {kind!r} is served at {api_version!r}")
        return found

    def _find(self, name: str) -> Api | None:
        with self._lock:
            return self._by_name.get(name.lower())

    def reload(self) -> None:
        by_name: dict[str, Api] = {}
        by_kind: dict[tuple[str, str], Api] = {}
        versions: list[tuple[str, str, bool]] = [("", "v1", True)]
        for group in self._get("/apis").get("groups") or []:
            preferred = (group.get("preferredVersion") or {}).get("version")
            for version in group.get("versions") or []:
                v = version["version"]
                versions.append((group["name"], v, v == preferred))
        for group, version, preferred in versions:
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            try:
                resources = self._get(path).get("resources") or []
            except ApiError:
                continue  # a group going away (a CRD just deleted)
            subs = {r["name"] for r in resources if "/" in r["name"]}
            for r in resources:
                if "/" in r["name"]:
                    continue
                api = Api(
                    group, version, r["name"], r["kind"], bool(r["namespaced"]),
                    f"{r['name']}/status" in subs,
                )  # fmt: skip
                by_kind[(api.api_version, api.kind)] = api
                names = [r["name"], r.get("singularName") or "", *(r.get("shortNames") or [])]
                for n in filter(None, names):
                    qualified = f"{n}.{group}" if group else n
                    if preferred or qualified not in by_name:
                        by_name[qualified] = api
                    # the core group (listed first) keeps its short names; else the preferred
                    if n not in by_name or (preferred and by_name[n].group == group):
                        by_name[n] = api
        with self._lock:
            self._by_name, self._by_kind = by_name, by_kind
