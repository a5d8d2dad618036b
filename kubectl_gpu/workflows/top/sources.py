"""Where `kubectl gpu top`'s figures come from, and reading them (docs/top.md): the
kubectl-gpu agent's `/v1/usage` on each node through the API server's pod proxy
(`pods/<agent pod>:9402/proxy/v1/usage`, which needs `get pods/proxy`), or else
dcgm-exporter's `/metrics` through the same proxy, or a `NoSourceError` saying what to
install. Answers are fetched at most `Options.concurrency` at a time, each within
`Options.deadline` seconds and a bounded size; a node that fails is named, a 403 fails the
whole command naming `pods/proxy`. Must not parse the answers (`workflows.top` does) nor
decide anything about them.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from collections.abc import Mapping
from typing import Any

from kubectl_gpu import cluster, keys
from kubectl_gpu.errors import ClusterError, GpuError
from kubectl_gpu.usage import dcgm

AGENT, EXPORTER = "agent", "dcgm-exporter"
AGENT_SELECTOR = f"{keys.APP_NAME_LABEL}=kubectl-gpu-agent"
AGENT_PORT = 9402
# the GPU Operator's exporter pods, and those of dcgm-exporter's own Helm chart
EXPORTER_SELECTORS = ("app=nvidia-dcgm-exporter", f"{keys.APP_NAME_LABEL}=dcgm-exporter")
EXPORTER_PORT = 9400
DEADLINE = 10.0  # seconds per node
CONCURRENCY = 16
MAX_USAGE_BYTES = 4 * 1024 * 1024  # an 8-GPU node with 4,096 processes each is ~3 MiB


class NoSourceError(GpuError):
    """Neither the kubectl-gpu agent nor dcgm-exporter runs in the cluster."""


@dataclasses.dataclass(frozen=True)
class Options:
    """Per-node deadline (seconds), nodes read at once, and `--idle`'s window (seconds)."""

    deadline: float = DEADLINE
    concurrency: int = CONCURRENCY
    idle: float | None = None


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """A pod serving figures for one node: the agent (port 9402) or dcgm-exporter (9400)."""

    kind: str
    node: str
    namespace: str
    pod: str
    port: int
    per_process: bool = True


def endpoints(api: cluster.Api, nodes: frozenset[str] | None) -> list[Endpoint]:
    """The agent on each of `nodes` (None: every node), or else dcgm-exporter's pods there.

    One node is looked up by a field selector (no cluster-wide LIST of the agent pods); with
    none there, the cluster may still have a source elsewhere, so the node is only named."""
    if nodes is not None and not nodes:
        return []
    on = next(iter(nodes)) if nodes is not None and len(nodes) == 1 else None
    agents = [_endpoint(AGENT, p, AGENT_PORT) for p in _running(api, AGENT_SELECTOR, on)]
    found = [e for e in agents if e is not None]
    if not found:
        exporters = [p for selector in EXPORTER_SELECTORS for p in _running(api, selector, on)]
        found = [
            e
            for p in dcgm.exporter_pods(exporters)
            if (e := _endpoint(EXPORTER, p, EXPORTER_PORT, dcgm.per_process(p)))
        ]
    if not found and on is None:
        raise NoSourceError(
            "no source of GPU use: neither the kubectl-gpu agent nor dcgm-exporter runs in "
            "this cluster",
            hint="install the agent with `kubectl gpu install` (or NVIDIA's dcgm-exporter, "
            "e.g. with the GPU Operator); docs/top.md",
        )
    unique = {e.node: e for e in found}
    return [e for n, e in sorted(unique.items()) if nodes is None or n in nodes]


def _running(api: cluster.Api, selector: str, node: str | None) -> list[dict[str, Any]]:
    fields = f"spec.nodeName={node}" if node else ""
    return list(api.list(cluster.path("pods"), label_selector=selector, field_selector=fields))


def _endpoint(kind: str, pod: Mapping[str, Any], port: int, own: bool = True) -> Endpoint | None:
    meta, spec, status = (pod.get(k) or {} for k in ("metadata", "spec", "status"))
    if not spec.get("nodeName") or status.get("phase") != "Running":
        return None
    for container in spec.get("containers") or []:
        for p in container.get("ports") or []:  # the pod's own port when it names one
            if p.get("name") in ("usage", "gpu-metrics", "metrics") and p.get("containerPort"):
                port = int(p["containerPort"])
    return Endpoint(
        kind,
        str(spec["nodeName"]),
        str(meta.get("namespace", "")),
        str(meta.get("name", "")),
        port,
        own,
    )


def where(endpoint: Endpoint) -> str:
    return f"{endpoint.kind} pod {endpoint.namespace}/{endpoint.pod}"


def fetch_all(
    api: cluster.Api, endpoints: list[Endpoint], options: Options, failed: dict[str, str]
) -> dict[Endpoint, tuple[str, str | None]]:
    """Every endpoint's answer, `concurrency` at a time, each within the deadline."""
    bounded = dataclasses.replace(
        api,
        deadline=options.deadline,
        timeout=options.deadline,
        retry_reads=False,
        connect_timeout=min(api.connect_timeout, options.deadline),
        max_answer=MAX_USAGE_BYTES,
    )
    answers: dict[Endpoint, tuple[str, str | None]] = {}
    workers = max(1, min(options.concurrency, len(endpoints)))
    with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="top") as pool:
        futures = {pool.submit(_fetch, bounded, e, options.idle is not None): e for e in endpoints}
        try:
            for future in concurrent.futures.as_completed(futures):
                endpoint = futures[future]
                try:
                    answers[endpoint] = future.result()
                except ClusterError as e:
                    if e.status == 403:
                        raise _forbidden(endpoint, e) from e
                    failed[endpoint.node] = f"{where(endpoint)}: {e.message}"
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return answers


def _fetch(api: cluster.Api, endpoint: Endpoint, idle: bool) -> tuple[str, str | None]:
    path = "/v1/usage" if endpoint.kind == AGENT else "/metrics"
    url = cluster.proxy_path(endpoint.namespace, endpoint.pod, endpoint.port, path)
    body = api.text(url)
    idle_body = None
    if idle:
        idle_body = api.text(
            cluster.proxy_path(endpoint.namespace, endpoint.pod, endpoint.port, "/v1/idle")
        )
    return body, idle_body


def _forbidden(endpoint: Endpoint, e: ClusterError) -> GpuError:
    return GpuError(
        "you may not read the GPU figures through the API server's pod proxy (get "
        f"pods/proxy in namespace {endpoint.namespace}): {e.message}",
        hint=f"ask a cluster admin to grant 'get' on 'pods/proxy' in namespace "
        f"{endpoint.namespace} (docs/rbac.md, role kubectl-gpu-top)",
    )
