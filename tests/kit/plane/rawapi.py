"""The plane's own raw requests to its kube-apiserver, as the admin, for the harness itself:
starting the plane (readiness, CRDs, the default ServiceAccount), issuing tokens and making
users, and a test's odd `plane.get(path)`.

Owns `RawApi`: one request (JSON in, JSON or text out) over TLS checked against the plane's CA,
a failure raised as `tests.kit.kube.ApiError` as the kit's other clients raise it. Must not
keep state between requests (no cache, no watch: `ApiStore`, store.py, does that) nor retry.
"""

from __future__ import annotations

import dataclasses
import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.kit.kube import errors


@dataclasses.dataclass(frozen=True)
class RawApi:
    url: str  # https://127.0.0.1:PORT
    token: str  # the admin's bearer token
    ca: Path  # the CA the server's certificate is checked against

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", content_type)
        context = ssl.create_default_context(cafile=str(self.ca))
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:  # as the harness's other clients: an ApiError
            raise errors.from_response(exc.code, exc.read()) from None
        return json.loads(payload) if payload[:1] in (b"{", b"[") else payload.decode()

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def ready(self, path: str) -> bool:
        """The server says "ok" at `path` (/readyz, /livez)."""
        answer: object = self.get(path)
        return answer == "ok"
