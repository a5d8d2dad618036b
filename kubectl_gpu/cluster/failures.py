"""Failures of the API server and the way to it, in the user's words.

Owns turning a status answer (a `kind: Status` body, 401, 403 with the permission it names)
and a transport error into one `ClusterError`, and keeping the credentials a server URL may
carry out of every message. Must not send anything.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from urllib3.exceptions import ReadTimeoutError

from kubectl_gpu.cluster.transport import MAX_RETRY_PAUSE, RETRY_PAUSE
from kubectl_gpu.errors import ClusterError

_MAX_BODY_IN_MESSAGE = 256


def redacted(url: str) -> str:
    """A server URL as it may be printed: no `user:password@`, no query or fragment (a
    kubeconfig may carry a token in either; kubectl prints neither)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(a server URL that cannot be read)"
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def url_secrets(url: str) -> tuple[str, ...]:
    """The parts of a server URL that may hold a credential: userinfo, query, fragment."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return (url,)
    userinfo = parts.netloc.rpartition("@")[0]
    return tuple(p for p in (userinfo, parts.query, parts.fragment) if p)


def _scrubbed(text: str, secrets: tuple[str, ...]) -> str:
    """`text` (a transport error, which may quote the URL it used) without the credentials."""
    for secret in secrets:
        text = text.replace(secret, "…")
    return text


def retriable(e: Exception) -> bool:
    """A failure to connect (refused, reset, connect timeout), not one while waiting to read."""
    return not isinstance(e, ReadTimeoutError) and not isinstance(
        getattr(e, "reason", None), ReadTimeoutError
    )


def retry_after(response: Any) -> float:
    """The server's Retry-After (seconds), bounded; RETRY_PAUSE without one."""
    headers = getattr(response, "headers", None) or {}
    try:
        return min(MAX_RETRY_PAUSE, max(0.0, float(headers.get("Retry-After", RETRY_PAUSE))))
    except (TypeError, ValueError):
        return RETRY_PAUSE


def unreachable(server: str, context: str, secrets: tuple[str, ...], e: Exception) -> ClusterError:
    """The server could not be reached; `e`'s text, which may quote the URL, without `secrets`."""
    reason = _scrubbed(str(getattr(e, "reason", None) or e), secrets)
    return ClusterError(
        f"cannot reach the API server at {server} (context {context!r}): {reason}",
        hint="check that the cluster is up and that --kubeconfig/--context point at it "
        "(kubectl cluster-info)",
    )


_FORBIDDEN = re.compile(
    r'cannot (?P<verb>\w+) resource "(?P<resource>[^"]+)" in API group "(?P<group>[^"]*)"'
)


def from_status(status: int, reason: str, body: Any, method: str, url: str) -> ClusterError:
    message, status_reason = _status_message(body)
    if status == 401:
        return ClusterError(
            "the API server rejected the credentials (401 Unauthorized)",
            hint="refresh your login for this context (kubectl config view --minify)",
            status=status,
        )
    if status == 403:
        return ClusterError(
            message or f"forbidden: {method} {url}", status=status, hint=_forbidden_hint(message)
        )
    if status == 404 and not status_reason:
        # kube-apiserver answers a path it does not route (a CRD or API group not installed)
        # with a plain "404 page not found", not a Status naming the object
        return ClusterError(
            f"{method} {url}: this API server does not serve that resource (404 Not Found)",
            hint="is its CustomResourceDefinition or API group installed? (kubectl api-resources)",
            status=status,
        )
    text = message or f"{method} {url} failed"
    return ClusterError(f"{text} ({status} {status_reason or reason})", status=status)


def _forbidden_hint(message: str) -> str:
    found = _FORBIDDEN.search(message)
    if not found:
        return "ask a cluster admin for the permission named above"
    group = found["group"] or "core"
    return (
        f"ask a cluster admin to grant '{found['verb']}' on '{found['resource']}' "
        f"(API group {group}), e.g. with a Role or ClusterRole bound to you"
    )


def _status_message(body: Any) -> tuple[str, str]:
    """Message and reason from a `kind: Status` body; other bodies are cut short."""
    if not body:
        return "", ""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    try:
        status = json.loads(text)
    except ValueError:
        return text[:_MAX_BODY_IN_MESSAGE], ""
    if isinstance(status, dict) and status.get("kind") == "Status":
        message, reason = str(status.get("message", "")), str(status.get("reason", ""))
        if reason == "TooManyRequests":  # an eviction refused: the causes name the budget
            causes = (status.get("details") or {}).get("causes") or []
            said = [
                str(c.get("message")) for c in causes if isinstance(c, dict) and c.get("message")
            ]
            message = " ".join([message, *said])
        return message, reason
    return text[:_MAX_BODY_IN_MESSAGE], ""


class AnswerTooLarge(ClusterError):
    """An answer grew past what its request may hold; `declared` is its Content-Length (0
    when the server streamed it without one)."""

    def __init__(self, message: str, *, hint: str, declared: int) -> None:
        super().__init__(message, hint=hint)
        self.declared = declared


def whole(text: Any) -> int:
    try:
        return max(0, int(str(text)))
    except ValueError:
        return 0
