"""The Kubernetes API: connecting, raw JSON requests, and errors in the user's words.

The only package that imports `kubernetes`. It reads and writes plain JSON through
`ApiClient.call_api(..., _preload_content=False)` rather than the generated `V1…`
models: about ten times faster on large lists (docs/architecture.md, "Ports"), and any resource,
custom or not, works the same way. Every `ApiException` and transport error becomes
a `ClusterError` here, once. Must not decide anything: an `if` here is about the
protocol (paging, status codes), never about GPUs.

This module is the client's public face; the nouns live beside it: `kubeconfig`
(connecting), `api` (requests, watches, retries), `transport` (one raw exchange and its
deadlines), `failures` (errors in the user's words), `resources` (REST paths).
"""

from __future__ import annotations

from kubectl_gpu.cluster.api import PAGE_SIZE, Api, Json, LogTail
from kubectl_gpu.cluster.discovery import served_versions
from kubectl_gpu.cluster.failures import redacted
from kubectl_gpu.cluster.kubeconfig import connect
from kubectl_gpu.cluster.resources import path, proxy_path
from kubectl_gpu.cluster.transport import (
    ANSWER_DEADLINE,
    CONNECT_TIMEOUT,
    MAX_ANSWER_BYTES,
    MAX_RETRY_PAUSE,
    READ_TIMEOUT,
    RETRY_PAUSE,
    WATCH_IDLE,
)

__all__ = [
    "ANSWER_DEADLINE",
    "CONNECT_TIMEOUT",
    "MAX_ANSWER_BYTES",
    "MAX_RETRY_PAUSE",
    "PAGE_SIZE",
    "READ_TIMEOUT",
    "RETRY_PAUSE",
    "WATCH_IDLE",
    "Api",
    "Json",
    "LogTail",
    "connect",
    "path",
    "proxy_path",
    "redacted",
    "served_versions",
]
