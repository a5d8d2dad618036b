"""Publishing a node's GPUNodeReport: one object per node, written only when it changes.

Owns the write side the node agent calls: `publish(api, report, previous_digest)` skips every
request when the digest is the one it last wrote, skips the write when the stored object
already carries the digest (an agent restart), creates the object owned by its Node (so it
goes when the node goes) or replaces it, and re-reads on a 409 (the object changed, or another
writer created it meanwhile). Must not build reports (`gpumap.report` does) or loop.
"""

from __future__ import annotations

import logging
from typing import Any

from kubectl_gpu import cluster
from kubectl_gpu.errors import ClusterError
from kubectl_gpu.gpumap import report
from kubectl_gpu.gpumap.report import NodeReport

log = logging.getLogger(__name__)

RESOURCE = "gpunodereports"
ATTEMPTS = 3  # a conflict means someone else wrote meanwhile; a few re-reads settle it


def publish(api: cluster.Api, node_report: NodeReport, previous_digest: str | None) -> str:
    """Write `node_report` unless its content is unchanged; return the digest now stored."""
    digest = node_report.digest
    if digest == previous_digest:
        return digest
    for _ in range(ATTEMPTS):
        stored = _read(api, node_report.node)
        if _digest_of(stored) == digest:
            log.debug("report of %s unchanged (%s); not written", node_report.node, digest)
            return digest
        try:
            _write(api, node_report, stored)
        except ClusterError as e:
            if e.status != 409:
                raise
            log.debug("report of %s changed meanwhile (409); reading it again", node_report.node)
            continue
        return digest
    raise ClusterError(
        f"the GPUNodeReport {node_report.node} kept changing while it was written "
        f"({ATTEMPTS} conflicts)",
        hint="another writer updates the same report: is a second agent running on the node?",
        status=409,
    )


def body(node_report: NodeReport, node_uid: str, resource_version: str | None) -> dict[str, Any]:
    """The object: named after the node, owned by it (garbage-collected with it)."""
    metadata: dict[str, Any] = {
        "name": node_report.node,
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": node_report.node, "uid": node_uid}
        ],
    }
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    return {
        "apiVersion": report.API_VERSION,
        "kind": report.KIND,
        "metadata": metadata,
        **node_report.to_dict(),
    }


def _read(api: cluster.Api, node: str) -> dict[str, Any] | None:
    try:
        return api.get(cluster.path(RESOURCE, node))
    except ClusterError as e:
        if e.status == 404:
            return None
        raise


def _digest_of(stored: dict[str, Any] | None) -> str | None:
    status = (stored or {}).get("status") or {}
    digest = status.get("digest")
    return digest if isinstance(digest, str) else None


def _write(api: cluster.Api, node_report: NodeReport, stored: dict[str, Any] | None) -> None:
    if stored is None:
        owner = _node_uid(api, node_report.node)
        api.create(cluster.path(RESOURCE), body(node_report, owner, None))
        log.info("created the GPUNodeReport of %s", node_report.node)
        return
    meta = stored.get("metadata") or {}
    owners = [o for o in meta.get("ownerReferences") or [] if o.get("kind") == "Node"]
    owner = str(owners[0].get("uid")) if owners else _node_uid(api, node_report.node)
    version = str(meta.get("resourceVersion") or "") or None
    api.replace(cluster.path(RESOURCE, node_report.node), body(node_report, owner, version))
    log.info("updated the GPUNodeReport of %s", node_report.node)


def _node_uid(api: cluster.Api, node: str) -> str:
    """The owner's UID: the report is garbage-collected when the Node is deleted."""
    found = api.get(cluster.path("nodes", node))
    return str((found.get("metadata") or {}).get("uid", ""))
