"""Reading what each pod uses of its GPUs (`kubectl gpu top`), on demand, through the API server.

Owns the reading as a whole (docs/top.md): which nodes the scope asks, the answers read
once (the agent's `/v1/usage` document, or dcgm-exporter's samples) with each node that
fails or does not answer in time named in `TopReading.failed` and the others shown, the
nodes' sharing strategy label, the pods (UIDs and container IDs to names), and the rows the
scope keeps. Where the answers come from and how they are fetched (agent, else
dcgm-exporter, else `NoSourceError`; a deadline and a bound per node; a 403 naming
`pods/proxy`) is `top.sources`'. Must not decide (`usage.view`, `usage.dcgm`,
`usage.samples` do) or render (the CLI does).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from kubectl_gpu import cluster, keys
from kubectl_gpu.errors import ClusterError, GpuError
from kubectl_gpu.gpumap.report import parse_time
from kubectl_gpu.usage import dcgm, document, prometheus, samples, view
from kubectl_gpu.usage.view import PodInfo, TopRow
from kubectl_gpu.workflows.top import sources
from kubectl_gpu.workflows.top.sources import (
    AGENT,
    EXPORTER,
    Endpoint,
    NoSourceError,
    Options,
)

__all__ = ["AGENT", "EXPORTER", "IdleRow", "NoSourceError", "Options", "Scope", "TopReading",
           "read"]  # fmt: skip

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Scope:
    """Which nodes (None: all), which pods (a name, a namespace, None: all; pod labels)."""

    node: str | None = None
    pod: str | None = None
    namespace: str | None = None
    selector: str | None = None


@dataclasses.dataclass(frozen=True)
class IdleRow:
    """A holder that used nothing over the `--idle` window (docs/top.md)."""

    node: str
    idle: samples.Idle


@dataclasses.dataclass(frozen=True)
class TopReading:
    """The rows, where they came from, the nodes that failed (node → why), the idle rows."""

    source: str
    per_process: bool
    rows: list[TopRow]
    failed: dict[str, str]
    nodes: int
    idle: list[IdleRow] | None = None


def read(api: cluster.Api, scope: Scope, options: Options) -> TopReading:
    """The figures of every node in `scope`, from the first source the cluster has.

    Pods are listed (to name UIDs and containers) when the scope filters pods, and otherwise
    only when an answer holds a process whose pod the agent could not name: at fleet scale
    the agents' answers, not a cluster-wide pod LIST, carry the cost."""
    pods = list(_pods(api, scope)) if _filters_pods(scope) else None
    _check_pod(scope, pods)
    asked = _nodes_to_ask(scope, pods)
    endpoints = sources.endpoints(api, asked)
    if options.idle is not None and endpoints and endpoints[0].kind != AGENT:
        raise GpuError(
            "--idle needs the kubectl-gpu agent (it keeps the samples); only dcgm-exporter "
            "runs here",
            hint="kubectl gpu install adds the agent",
        )
    failed: dict[str, str] = {}
    for node in sorted(_named_nodes(scope, pods)):
        if not any(e.node == node for e in endpoints):
            failed[node] = "neither the kubectl-gpu agent nor dcgm-exporter runs on it"
    strategies = _strategies(api, scope.node, asked)
    parsed = _parsed(sources.fetch_all(api, endpoints, options, failed), failed, options)
    if pods is None:
        pods = list(_pods(api, scope)) if _unnamed(parsed) else []
    infos = [_info(p) for p in pods]
    rows: list[TopRow] = []
    idle: list[IdleRow] = []
    for endpoint, (answer, idle_doc) in sorted(parsed.items(), key=lambda a: a[0].node):
        if isinstance(answer, document.NodeUsage):
            rows += view.make(answer, infos, strategies.get(endpoint.node))
        else:
            rows += dcgm.rows(endpoint.node, answer, endpoint.per_process)
        idle += [IdleRow(endpoint.node, i) for i in idle_doc]
    kind = endpoints[0].kind if endpoints else AGENT
    own = all(e.per_process for e in endpoints)
    chosen_idle = [i for i in idle if _idle_wanted(i, scope, pods)]
    return TopReading(kind, own, _chosen(rows, scope, pods), failed, len(endpoints),
                      chosen_idle if options.idle is not None else None)  # fmt: skip


def _nodes_to_ask(scope: Scope, pods: list[dict[str, Any]] | None) -> frozenset[str] | None:
    """The nodes whose figures the scope can show (None: every node): `top node/NAME` asks
    that node, a pod filter the nodes its pods run on, and no agent is asked for a node
    whose rows would all be dropped."""
    if pods is None:
        return None if scope.node is None else frozenset({scope.node})
    return frozenset(str(n) for p in pods if (n := (p.get("spec") or {}).get("nodeName")))


def _named_nodes(scope: Scope, pods: list[dict[str, Any]] | None) -> set[str]:
    """The nodes the user named, or the one that runs the pod the user named: one without a
    source is a failure to say. Nodes that merely run pods of a namespace are not (most
    run no GPU)."""
    if scope.node is not None:
        return {scope.node}
    if scope.pod is not None:
        return set(_nodes_to_ask(scope, pods) or ())
    return set()


def _filters_pods(scope: Scope) -> bool:
    return scope.namespace is not None or scope.pod is not None or scope.selector is not None


def _check_pod(scope: Scope, pods: list[dict[str, Any]] | None) -> None:
    """`top pod NAME` of a pod that does not exist fails as kubectl does, before any agent
    is asked."""
    if scope.pod is None or any((p.get("metadata") or {}).get("name") == scope.pod
                                for p in pods or ()):  # fmt: skip
        return
    where = f" on node {scope.node}" if scope.node else ""
    raise GpuError(
        f'pods "{scope.pod}" not found in namespace {scope.namespace}{where}',
        hint="kubectl get pods -n NAMESPACE lists the pod names",
    )


# one node's answer read: the agent's document (or the exporter's samples), and its idle holders
Parsed = tuple[document.NodeUsage | tuple[prometheus.Sample, ...], list[samples.Idle]]


def _parsed(
    answers: dict[Endpoint, tuple[str, str | None]], failed: dict[str, str], options: Options
) -> dict[Endpoint, Parsed]:
    """Each answer read once; a node whose answer cannot be read is named in `failed`."""
    found: dict[Endpoint, Parsed] = {}
    for endpoint, (body, idle_body) in answers.items():
        try:
            if endpoint.kind == EXPORTER:
                metrics = prometheus.parse(body)
                if metrics.truncated:
                    log.warning("node %s: dcgm-exporter's answer was cut at its bounds",
                                endpoint.node)  # fmt: skip
                found[endpoint] = (metrics.samples, [])
                continue
            usage = document.from_dict(_json(body))
            for problem in usage.problems:
                log.warning("node %s: %s", endpoint.node, problem)
            idle = []
            if idle_body is not None and options.idle is not None:
                idle = _idle(idle_body, options.idle)
            found[endpoint] = (usage, idle)
        except document.UsageDocumentError as e:
            failed[endpoint.node] = f"{sources.where(endpoint)} answered something unreadable: {e}"
    return found


def _unnamed(parsed: dict[Endpoint, Parsed]) -> bool:
    """Whether a process's pod is known to its agent by UID only (a DRA pod, a pod holding
    no device there): then the pods are listed to name it."""
    for answer, _ in parsed.values():
        if not isinstance(answer, document.NodeUsage):
            continue
        named = {h.pod_uid for h in answer.held if h.pod_uid and h.pod}
        if any(a.pod_uid and a.pod_uid not in named for _, a in answer.processes):
            return True
    return False


# --- names, labels, rows ------------------------------------------------------------------------


def _strategies(
    api: cluster.Api, node: str | None, asked: frozenset[str] | None
) -> dict[str, str | None]:
    """Each asked node's `nvidia.com/gpu.sharing-strategy` label (NVIDIA's GFD sets it): the
    named node (which must exist), the one node a pod runs on, or else every node."""
    if node is not None:
        try:
            nodes = [api.get(cluster.path("nodes", node))]
        except ClusterError as e:
            if e.status == 404:
                raise GpuError(
                    f'nodes "{node}" not found', hint="kubectl get nodes lists the node names"
                ) from e
            raise
    elif asked is not None and len(asked) <= 1:
        nodes = [n for name in asked if (n := _node(api, name)) is not None]
    else:
        nodes = list(api.list(cluster.path("nodes")))
    return {
        str((n.get("metadata") or {}).get("name")): (
            (n.get("metadata") or {}).get("labels") or {}
        ).get(keys.GPU_SHARING_STRATEGY_LABEL)
        for n in nodes
    }


def _node(api: cluster.Api, name: str) -> dict[str, Any] | None:
    try:
        return dict(api.get(cluster.path("nodes", name)))
    except ClusterError as e:
        if e.status == 404:  # the pod's node is gone: its figures carry no strategy
            return None
        raise


def _pods(api: cluster.Api, scope: Scope) -> Iterator[dict[str, Any]]:
    url = cluster.path("pods", namespace=scope.namespace)
    chosen = [f"spec.nodeName={scope.node}"] if scope.node else []
    chosen += [f"metadata.name={scope.pod}"] if scope.pod else []
    fields = ",".join(chosen)
    yield from api.list(url, label_selector=scope.selector or "", field_selector=fields)


def _info(pod: Mapping[str, Any]) -> PodInfo:
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    containers = {}
    for s in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
        runtime_id = str(s.get("containerID") or "")
        if "://" in runtime_id:
            containers[runtime_id.split("://", 1)[1]] = str(s.get("name"))
    return PodInfo(
        str(meta.get("uid")), str(meta.get("namespace")), str(meta.get("name")), containers
    )


def _json(body: str) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as e:
        raise document.UsageDocumentError(f"not JSON: {e}") from e


def _idle(idle_body: str, window: float) -> list[samples.Idle]:
    doc = _json(idle_body)
    found = samples.from_dict(doc)
    read_at = parse_time(str(doc.get("readAt", "")))
    if read_at is None:
        raise document.UsageDocumentError("the idle samples carry no readAt time")
    return samples.idle(found, read_at.timestamp(), window)


def _chosen(rows: list[TopRow], scope: Scope, pods: list[dict[str, Any]]) -> list[TopRow]:
    """Every row with no pod filter; else the chosen pods' rows and their GPUs' rows."""
    if scope.namespace is None and scope.pod is None and scope.selector is None:
        return rows
    names = {
        ((p.get("metadata") or {}).get("namespace"), (p.get("metadata") or {}).get("name"))
        for p in pods
    }
    wanted = [
        r
        for r in rows
        if r.kind == view.POD
        and (r.namespace, r.pod) in names
        and (scope.pod is None or r.pod == scope.pod)
    ]
    gpus = {(r.node, r.gpu_uuid) for r in wanted}
    kept = {id(r) for r in wanted}  # by identity: comparing rows field by field is quadratic
    return [
        r for r in rows if id(r) in kept or (r.kind != view.POD and (r.node, r.gpu_uuid) in gpus)
    ]


def _idle_wanted(row: IdleRow, scope: Scope, pods: list[dict[str, Any]]) -> bool:
    if scope.namespace is None and scope.pod is None and scope.selector is None:
        return True
    h = row.idle.holder
    names = {
        ((p.get("metadata") or {}).get("namespace"), (p.get("metadata") or {}).get("name"))
        for p in pods
    }
    return (h.namespace, h.pod) in names and (scope.pod is None or h.pod == scope.pod)
