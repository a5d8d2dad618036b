"""Reading the agents' GPUNodeReports: each node's, by node name.

Owns `read_all`, the one read of the reports that `share` (GPU counts where GFD labels none),
`mig status`/`recover`, doctor (MIG devices per GPU) and `uninstall` (MIG-enabled GPUs) take:
a report that does not parse is left out, and none are read where the resource is not served
(no agent installed: 404) or the user may not read it (403). Must not write (doctor and status
import it; `reports` publishes).
"""

from __future__ import annotations

import logging

from kubectl_gpu import cluster, errors
from kubectl_gpu.gpumap import report
from kubectl_gpu.gpumap.report import NodeReport

log = logging.getLogger(__name__)


def read_all(api: cluster.Api) -> dict[str, NodeReport]:
    """Each node's report by node name (see the module's docstring for what is left out)."""
    try:
        objects = list(api.list(cluster.path("gpunodereports")))
    except errors.ClusterError as e:
        if e.status not in (403, 404):
            raise
        log.info("agent reports not read: %s", e.message)
        return {}
    found = {}
    for obj in objects:
        try:
            node_report = report.from_dict(obj)
        except report.ReportError:
            continue
        found[node_report.node] = node_report
    return found


def read_one(api: cluster.Api, node: str) -> dict[str, NodeReport]:
    """`node`'s report alone (a report is named after its node), as `read_all` gives it."""
    try:
        obj = api.get(cluster.path("gpunodereports", node))
    except errors.ClusterError as e:
        if e.status not in (403, 404):
            raise
        log.info("agent report of %s not read: %s", node, e.message)
        return {}
    try:
        node_report = report.from_dict(obj)
    except report.ReportError:
        return {}
    return {node_report.node: node_report} if node_report.node == node else {}
