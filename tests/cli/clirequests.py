"""What the CLI asked a real API server for, from the server's audit log (not a test module).

The CLI talks through the Kubernetes Python client, whose user agent names it; the controllers,
KWOK and the simulated node side name themselves otherwise, so their requests are left out.
"""

from __future__ import annotations

from tests.kit.cluster import SimCluster

CLI_AGENT = "OpenAPI-Generator/"  # the Kubernetes Python client's user agent, up to its version


def mark(cluster: SimCluster) -> int:
    """Where the audit log is now: `since(cluster, mark(cluster))` is what came after."""
    assert cluster.plane is not None, "the audit log is the real server's"
    return len(cluster.plane.audit())


def since(cluster: SimCluster, start: int) -> list[str]:
    """`verb requestURI` (the audit log's verbs: get, list, create, patch, ...) of each request
    the CLI sent after `start`."""
    assert cluster.plane is not None
    return [
        f"{e['verb']} {e['requestURI']}"
        for e in cluster.plane.audit()[start:]
        if e.get("stage") == "RequestReceived" and str(e.get("userAgent", "")).startswith(CLI_AGENT)
    ]
