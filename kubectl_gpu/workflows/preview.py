"""Reading what a preview of a capacity change needs, and the MIG change as capacity.

Owns the reads behind `kubectl_gpu.doctor.preview` (every node with the GPUs bound pods ask
for, every pod, and from the agents' GPUNodeReports the devices each pod holds per GPU), and
turning a MIG config's verdict on a node into a `preview.Change`: the resources it advertises
afterwards, and the GPUs whose MIG devices differ from what the report shows now (those lose
every device). Used by `mig apply` and `share` (dry runs and `--drain`). A read the user may
not do (403) leaves that fact out. Must not decide who is hit (the domain does).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kubectl_gpu import cluster, errors, keys
from kubectl_gpu.doctor import facts
from kubectl_gpu.doctor import preview as domain
from kubectl_gpu.gpumap import join, report
from kubectl_gpu.mig.verdicts import ConfigVerdict, Status
from kubectl_gpu.sharing import names
from kubectl_gpu.sharing.rollout import Plan
from kubectl_gpu.workflows import agentreports

log = logging.getLogger(__name__)
Json = dict[str, Any]
GPU = "nvidia.com/gpu"


@dataclasses.dataclass(frozen=True)
class Facts:
    nodes: tuple[facts.Node, ...]
    pods: tuple[facts.Pod, ...]
    reports: Mapping[str, report.NodeReport]
    unmanaged: frozenset[str] = frozenset()  # namespace/name of running pods with no controller

    def held(self) -> dict[str, list[domain.Held]]:
        """Per node, the devices pods hold, with the GPU each sits on."""
        found: dict[str, list[domain.Held]] = {}
        for name, node_report in self.reports.items():
            joined = join.make(node_report.sources(), (), node_report.inventory())
            found[name] = [
                domain.Held(r.namespace, r.pod, r.resource, r.gpu_index, r.replica)
                for r in joined.rows
                if r.namespace and r.pod
            ]
        return found


def read(
    api: cluster.Api,
    nodes: Sequence[Json] | None = None,
    reports: Mapping[str, report.NodeReport] | None = None,
) -> Facts:
    """Every pod, and the nodes and agents' reports unless the caller has just read them
    (`share` has: at 5,000 nodes a second LIST of them costs seconds and the memory of both)."""
    pods = _optional(api, "pods")
    parsed = tuple(facts.pod_from_dict(p) for p in pods)
    used = facts.gpu_usage(parsed)
    listed = _optional(api, "nodes") if nodes is None else nodes
    found = tuple(
        facts.node_from_dict(n, used.get(str((n.get("metadata") or {}).get("name"))))
        for n in listed
    )
    if reports is None:
        reports = agentreports.read_all(api)
    return Facts(found, parsed, reports, frozenset(_unmanaged(pods)))


def _unmanaged(pods: Sequence[Json]) -> list[str]:
    """Pods no controller would recreate: `kubectl drain` refuses to evict them without
    --force (kubectl/pkg/drain/filters.go, unreplicatedFilter); ended pods do not count."""
    found = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        if (pod.get("status") or {}).get("phase") in domain.ENDED:
            continue
        if not any(o.get("controller") for o in meta.get("ownerReferences") or []):
            found.append(f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}")
    return found


def mig_change(node: str, verdict: ConfigVerdict, known: Facts) -> domain.Change:
    """A MIG config on `node` as a capacity change."""
    after = verdict.resources
    before = next((n.allocatable for n in known.nodes if n.name == node), {})
    owned = {GPU, *after} | {r for r in before if r.startswith(keys.MIG_RESOURCE_PREFIX)}
    node_report = known.reports.get(node)
    destroyed = _destroyed(verdict, node_report) if node_report else frozenset()
    return domain.Change(node, after, destroyed, frozenset(owned))


def _destroyed(verdict: ConfigVerdict, node_report: report.NodeReport) -> frozenset[int]:
    """GPUs whose MIG mode or devices the config changes, compared with the report."""
    now = {g.index: g for g in node_report.gpus if g.index is not None}
    changed = set()
    for gpu in verdict.gpus:
        if gpu.status is not Status.FITS:
            continue
        current = now.get(gpu.gpu.index)
        if current is None:
            changed.add(gpu.gpu.index)
            continue
        was_on = current.mig_mode == report.MIG_ENABLED
        had = sorted(str(m.profile) for m in current.mig_devices)
        wants = sorted(d.name for d in gpu.devices)
        if was_on != bool(gpu.mig_enabled) or had != wants:
            changed.add(gpu.gpu.index)
    return frozenset(changed)


def share_changes(plan: Plan) -> list[domain.Change]:
    """A sharing plan as capacity changes: each node's resource becomes gpus × replicas under
    the name it is advertised by afterwards (the other of plain/.shared goes to 0)."""
    changes = []
    for node in plan.nodes:
        if node.expected is None:
            continue  # physical devices unknown: no figure to promise
        base = node.resource.removesuffix(names.SHARED_SUFFIX)
        owned = frozenset({base, base + names.SHARED_SUFFIX})
        kept = node.replicas if node.replicas > 1 else None  # `::N` IDs only while shared
        after = {node.resource: node.expected}
        changes.append(domain.Change(node.node, after, resources=owned, replicas=kept))
    return changes


def make(changes: Sequence[domain.Change], known: Facts) -> domain.Preview:
    return domain.make(changes, known.nodes, known.pods, known.held(), known.unmanaged)


def _optional(api: cluster.Api, resource: str) -> list[Json]:
    try:
        return list(api.list(cluster.path(resource)))
    except errors.ClusterError as e:
        if e.status not in (403, 404):
            raise
        # 404: not served here (no agent's report CRD); 403: the user may not read it
        if e.status == 404:
            log.info(
                "the preview leaves out %s: not served here (is the agent installed?)", resource
            )
        else:
            log.warning("the preview leaves out %s: %s", resource, e.message)
        return []
