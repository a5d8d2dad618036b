"""`ApiError`: a request the API server refused, as its `kind: Status` answer says.

Owns the error type that `tests.kit.kube.client.KubeClient` and `tests.kit.plane.store.ApiStore`
raise and tests catch, with the server's HTTP code, reason and message, and `from_response`,
reading a failed response into one. Must not build Status bodies of its own: the server's
words are what a test sees.
"""

from __future__ import annotations

import http.client
import json
from typing import Any


class ApiError(Exception):
    """A failed request: HTTP code, the Status reason (e.g. "NotFound") and message."""

    def __init__(
        self, code: int, reason: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details if details is not None else {}


def from_response(code: int, body: bytes) -> ApiError:
    """The ApiError of a failed response: its `kind: Status` body, or the text of any other."""
    try:
        status = json.loads(body)
    except ValueError:
        status = {}
    if not isinstance(status, dict) or status.get("kind") != "Status":
        text = body.decode(errors="replace").strip() or http.client.responses.get(code, "")
        return ApiError(code, http.client.responses.get(code, "Unknown"), text, {})
    return ApiError(
        int(status.get("code") or code),
        str(status.get("reason") or ""),
        str(status.get("message") or ""),
        dict(status.get("details") or {}),
    )
