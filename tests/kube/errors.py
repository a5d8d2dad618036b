"""`ApiError`: a request the API server refused, as its `kind: Status` answer says.

Owns the error type that `tests.controlplane.store.ApiStore` raises and tests catch, with the
server's HTTP code, reason and message. Must not build Status bodies of its own: the server's
words are what a test sees.
"""

from __future__ import annotations

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
