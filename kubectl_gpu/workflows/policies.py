"""The GPU Operator's ClusterPolicies, for the commands that must know whether it runs.

Owns one question: which ClusterPolicies exist, for a user who may not be allowed to read them.
Without the right to list them, the operator still shows: it labels every node it manages
with `nvidia.com/gpu.deploy.*`. No such label on any node means no operator to ask, so a
user of the Helm chart or our bundle is not stopped by a right they have no use for. Must not
write.
"""

from __future__ import annotations

import logging
from typing import Any

from kubectl_gpu import cluster, keys
from kubectl_gpu.errors import ClusterError

Json = dict[str, Any]
log = logging.getLogger(__name__)


def cluster_policies(api: cluster.Api) -> list[Json]:
    """Every ClusterPolicy; none when the CRD is not installed, or when they may not be read
    and no node carries the operator's labels (ClusterError 403 when one does)."""
    try:
        return list(api.list(cluster.path("clusterpolicies")))
    except ClusterError as e:
        if e.status == 404:  # the CRD is not installed: no GPU Operator
            return []
        if e.status != 403:
            raise
        managed = [n for n in api.list(cluster.path("nodes")) if _operator_labels(n)]
        if managed:
            name = managed[0]["metadata"]["name"]
            raise ClusterError(
                f"{e.message} (the GPU Operator manages node {name}: its ClusterPolicy decides "
                "how the node's GPUs are configured)",
                hint=e.hint,
                status=403,
            ) from None
        log.info("ClusterPolicies may not be read; no node carries the GPU Operator's labels")
        return []


def _operator_labels(node: Json) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return any(str(k).startswith(keys.DEPLOY_LABEL_PREFIX) for k in labels)
