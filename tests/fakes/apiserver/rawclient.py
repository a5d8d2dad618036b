"""A bare HTTP/1.1 client for talking to the stand-in byte for byte (tests and benchmarks).

Owns `RawClient`: one request → (status, headers, body) without any Kubernetes library in
between, and `watch()`, which reads a chunked watch stream line by line. Must not be used
where the point is to check a real client: those tests use kubectl or the kubernetes package.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class RawClient:
    """Requests against one base URL such as `http://127.0.0.1:PORT`."""

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        parts = urlsplit(url)
        self.host, self.port = str(parts.hostname), int(parts.port or 80)
        self.timeout = timeout

    def _connect(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> RawResponse:
        """Send `body` (bytes as given, anything else as JSON) and read the whole answer."""
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        sent = {"Authorization": "Bearer anything", **(headers or {})}
        if data is not None:
            sent["Content-Type"] = content_type
        connection = self._connect()
        try:
            connection.request(method, path, body=data, headers=sent)
            response = connection.getresponse()
            return RawResponse(response.status, dict(response.getheaders()), response.read())
        finally:
            connection.close()

    def get(self, path: str, **headers: str) -> RawResponse:
        return self.request("GET", path, headers=headers)

    @contextmanager
    def watch(self, path: str) -> Iterator[Iterator[dict[str, Any]]]:
        """Open a watch; yields an iterator of decoded events that ends with the stream."""
        connection = self._connect()
        try:
            connection.request("GET", path, headers={"Authorization": "Bearer anything"})
            response = connection.getresponse()
            if response.status != 200:
                raise AssertionError(f"watch answered {response.status}: {response.read()!r}")
            yield (json.loads(line) for line in iter(response.readline, b""))
        finally:
            connection.close()
