"""Reading the cluster's GPU map: the agents' reports, the nodes, and DRA claims.

Owns the reads of `kubectl gpu map` and their cost, which must stay flat as the cluster grows
(docs/architecture.md, "Budgets"): ONE paginated LIST of GPUNodeReports, one LIST of nodes (only to
name GPU nodes without a report; `-l` is passed to the server), one GET of the `resource.k8s.io`
group (which version the server serves: v1, v1beta2 or v1beta1) and, only when the cluster has DRA
ResourceClaims, the claims, NVIDIA's ResourceSlices and the pods of the claims' namespaces.
No per-node requests. Raw JSON becomes small frozen values once, here. Must not decide (the
domain joins) or render (the CLI does).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Iterator
from typing import Any

from kubectl_gpu import cluster
from kubectl_gpu.dra import slices as draslices
from kubectl_gpu.errors import ClusterError
from kubectl_gpu.gpumap import clustermap, dra, report
from kubectl_gpu.gpumap.clustermap import ClusterMap, NodeFacts
from kubectl_gpu.gpumap.join import Row
from kubectl_gpu.gpumap.report import NodeReport

log = logging.getLogger(__name__)

DRA_GROUP = "resource.k8s.io"
DRA_VERSIONS = ("v1", "v1beta2", "v1beta1")  # newest first; the object shapes differ little
MAX_NAMESPACE_LISTS = 20  # beyond this many claim namespaces, one cluster-wide pod LIST is cheaper


@dataclasses.dataclass(frozen=True)
class Scope:
    """Which nodes (names, a label selector) and namespace (None: all) to map."""

    nodes: tuple[str, ...] = ()
    selector: str | None = None
    namespace: str | None = None


def read(api: cluster.Api, scope: Scope, now: dt.datetime) -> ClusterMap:
    """The map of the nodes in `scope`, as their agents last reported them."""
    reports, reasons = _reports(api)
    listed = api.list(cluster.path("nodes"), label_selector=scope.selector or "")
    nodes = [clustermap.node_facts(n) for n in listed]
    if "*" in reasons:
        reasons = {n.name: reasons["*"] for n in nodes if n.has_gpus}
    wanted = _wanted(scope, nodes)
    if wanted is not None:
        reports = [r for r in reports if r.node in wanted]
        nodes = [n for n in nodes if n.name in wanted]
        reasons = {n: why for n, why in reasons.items() if n in wanted}
        known = {n.name for n in nodes}
        reasons |= {n: clustermap.NO_NODE for n in scope.nodes if n not in known}
    rows = [r for r in _dra_rows(api, scope.namespace) if wanted is None or r.node in wanted]
    return clustermap.make(reports, rows, nodes, now, reasons)


def _wanted(scope: Scope, nodes: list[NodeFacts]) -> set[str] | None:
    """The node names to show; None for every node."""
    if scope.nodes:
        return set(scope.nodes)
    if scope.selector:
        return {n.name for n in nodes}
    return None


def _reports(api: cluster.Api) -> tuple[list[NodeReport], dict[str, str]]:
    """Every report (one paginated LIST), and why a node's report could not be used (`*`:
    every GPU node's, when the server does not serve the report resource at all)."""
    found: list[NodeReport] = []
    reasons: dict[str, str] = {}
    try:
        for obj in api.list(cluster.path("gpunodereports")):
            name = str((obj.get("metadata") or {}).get("name", ""))
            try:
                found.append(report.from_dict(obj))
            except report.ReportError as e:
                reasons[name] = clustermap.unreadable(str(e))
    except ClusterError as e:
        if e.status != 404:
            raise
        log.debug("no GPUNodeReport resource on this server: %s", e)
        return [], {"*": clustermap.NO_REPORT_TYPE}
    return found, reasons


def dra_version(api: cluster.Api) -> str | None:
    """The `resource.k8s.io` version to read: v1 (Kubernetes 1.34+), else v1beta2 (1.33),
    else v1beta1 (1.32); None when the server serves no DRA at all."""
    try:
        served = cluster.served_versions(api, DRA_GROUP)
    except ClusterError as e:
        if e.status != 403:
            raise
        log.debug("discovery of %s refused, assuming v1: %s", DRA_GROUP, e)
        return DRA_VERSIONS[0]  # a later LIST says 404 or 403 in its own words
    return next((v for v in DRA_VERSIONS if v in served), None)


def _dra_rows(api: cluster.Api, namespace: str | None) -> list[Row]:
    """DRA allocations, read only when the cluster has ResourceClaims for NVIDIA's driver."""
    version = dra_version(api)
    if version is None:
        return []
    listed = _list_or_none(api, "resourceclaims", namespace, version=version)
    claims = [c for c in map(dra.claim_of, listed) if c]
    claims = [c for c in claims if any(r.driver == dra.DRIVER for r in c.results)]
    if not claims:
        return []
    selector = f"spec.driver={dra.DRIVER}"
    slices = list(_list_or_none(api, "resourceslices", None, selector, version=version))
    devices = [d for s in slices for d in dra.slice_devices(s)]
    counter_sets = [c for s in slices for c in draslices.counter_sets(s)]
    namespaces = sorted({c.namespace for c in claims if c.reserved_by})
    pods = [dra.pod_claims(p) for p in _pods(api, namespaces)]
    return dra.rows(claims, devices, pods, counter_sets)


def _pods(api: cluster.Api, namespaces: list[str]) -> Iterator[dict[str, Any]]:
    if len(namespaces) > MAX_NAMESPACE_LISTS:
        yield from api.list(cluster.path("pods"))
        return
    for namespace in namespaces:
        yield from api.list(cluster.path("pods", namespace=namespace))


def _list_or_none(
    api: cluster.Api,
    resource: str,
    namespace: str | None,
    field_selector: str = "",
    version: str = "",
) -> Iterator[dict[str, Any]]:
    """A LIST, or nothing when the server does not serve the resource (no DRA: 404) or the
    user may not read it (403: the map shows the device-plugin plane and says what is missing)."""
    try:
        url = cluster.path(resource, namespace=namespace, version=version)
        yield from api.list(url, field_selector=field_selector)
    except ClusterError as e:
        if e.status == 403:
            log.warning("DRA allocations left out of the map: %s", e.message)
            return
        if e.status != 404:
            raise
        log.debug("%s not served: %s", resource, e)
