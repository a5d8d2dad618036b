"""Kubernetes API server stand-in (test code only): HTTP on 127.0.0.1, real REST semantics.

For unit-level tests and fault injection only (`deny()`, seeded status, served logs, a faked
server version): end-to-end tests and the demo run on a real kube-apiserver
(tests/controlplane, `SimCluster(backend="real")`), which is what decides how Kubernetes
behaves. Where the two differed, the real server was right (see the closing note of issue 20).

Owns nothing itself; it names the public pieces: `FakeApiServer` (the HTTP server, with
`.url`, `.store`, `.deny()`, `.requests`), `Store` (thread-safe objects with `create`, `get`,
`list`, `update`, `update_status`, `patch`, `delete`, `subscribe`, `wait_until`),
`ApiError`, `write_kubeconfig` and `cluster_policy_crd()`. Must not be imported by product
code.
"""

from __future__ import annotations

from tests.fakes.apiserver.crds import cluster_policy_crd
from tests.fakes.apiserver.errors import ApiError
from tests.fakes.apiserver.records import ObjectKey
from tests.fakes.apiserver.seeding import Store
from tests.fakes.apiserver.server import FakeApiServer, write_kubeconfig

__all__ = [
    "ApiError",
    "FakeApiServer",
    "ObjectKey",
    "Store",
    "cluster_policy_crd",
    "write_kubeconfig",
]
