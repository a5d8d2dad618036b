"""API errors of the stand-in, shaped as the real server's `kind: Status` bodies.

Owns `ApiError` and one constructor per failure the stand-in can report, with the real
server's reasons, codes and message forms (`pods "x" not found`, `Operation cannot be
fulfilled on …`). Must not know about HTTP handlers or storage: callers raise, the
server renders `ApiError.body()`.
"""

from __future__ import annotations

import json
from typing import Any


class ApiError(Exception):
    """A failed request, carrying everything a `Status` body needs."""

    def __init__(
        self, code: int, reason: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details if details is not None else {}

    def status(self) -> dict[str, Any]:
        """The `Status` object as the real server writes it."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "details": self.details,
            "code": self.code,
        }
        return body

    def body(self) -> bytes:
        return json.dumps(self.status()).encode()


def _details(name: str, group: str, kind: str) -> dict[str, Any]:
    details: dict[str, Any] = {"kind": kind}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return details


def _qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, group: str, name: str) -> ApiError:
    message = f'{_qualified(resource, group)} "{name}" not found'
    return ApiError(404, "NotFound", message, _details(name, group, resource))


def path_not_found() -> ApiError:
    cause = {"reason": "UnexpectedServerResponse", "message": "404 page not found"}
    message = "the server could not find the requested resource"
    return ApiError(404, "NotFound", message, {"causes": [cause]})


def already_exists(resource: str, group: str, name: str) -> ApiError:
    message = f'{_qualified(resource, group)} "{name}" already exists'
    return ApiError(409, "AlreadyExists", message, _details(name, group, resource))


def conflict(resource: str, group: str, name: str) -> ApiError:
    message = (
        f'Operation cannot be fulfilled on {_qualified(resource, group)} "{name}": the object '
        "has been modified; please apply your changes to the latest version and try again"
    )
    return ApiError(409, "Conflict", message, _details(name, group, resource))


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """422 Invalid; `causes` are (field, reason, message) as in field.ErrorList."""
    qualified = f"{kind}.{group}" if group else kind
    texts = [f"{field}: {message}" for field, _, message in causes]
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    details = _details(name, group, kind)
    details["causes"] = [
        {"reason": reason, "message": message, "field": field} for field, reason, message in causes
    ]
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {joined}', details)


def unprocessable(message: str) -> ApiError:
    """422 without field causes, as the real server answers a failed JSON-patch `test`."""
    return ApiError(422, "Invalid", message, {})


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message, {})


def method_not_allowed() -> ApiError:
    message = "the server does not allow this method on the requested resource"
    return ApiError(405, "MethodNotAllowed", message, {})


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    message = (
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)}"
    )
    return ApiError(415, "UnsupportedMediaType", message, {"causes": [{"message": content_type}]})


def too_large(limit: int) -> ApiError:
    message = f"the request body is larger than the {limit} bytes this server accepts"
    return ApiError(413, "RequestEntityTooLarge", message, {})


def expired(requested: str, oldest: int) -> ApiError:
    message = f"too old resource version: {requested} ({oldest})"
    return ApiError(410, "Expired", message, {})


def forbidden(access: dict[str, str], user: str) -> ApiError:
    """403 in the real RBAC wording; `access` has verb, resource, group, namespace, name."""
    resource, group, name = access["resource"], access["group"], access["name"]
    base = _qualified(resource.split("/")[0], group)
    subject = f'{base} "{name}"' if name else base
    where = (
        f'in the namespace "{access["namespace"]}"'
        if access["namespace"]
        else "at the cluster scope"
    )
    message = (
        f'{subject} is forbidden: User "{user}" cannot {access["verb"]} resource "{resource}" '
        f'in API group "{group}" {where}'
    )
    return ApiError(403, "Forbidden", message, _details(name, group, resource.split("/")[0]))
