"""A GPU node as `kubectl_gpu.mig.stuck` judges it, read from the cluster.

Owns the reads behind `mig.stuck`: each GPU node's labels and annotations, the MIG devices the
agent's GPUNodeReport shows per GPU (a cluster without the report resource has none), and
while a change is pending, whether its actuator's pod runs on the node. `mig status`, `mig
recover` and doctor read stuck nodes through this module, so it must never write; nor decide
what counts as stuck (kubectl_gpu.mig.stuck does).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence

from kubectl_gpu import cluster, errors
from kubectl_gpu.gpumap import report
from kubectl_gpu.mig import stuck
from kubectl_gpu.mig.actuators import Actuator
from kubectl_gpu.workflows import agentreports
from kubectl_gpu.workflows.mig import silence
from kubectl_gpu.workflows.mig.targets import NodeFacts

log = logging.getLogger(__name__)


def reported_gpus(api: cluster.Api, node: str = "") -> dict[str, tuple[stuck.ReportedGpu, ...]]:
    """Per node, the GPUs its agent's report shows (nodes without a report left out);
    `node`: that node's report alone (one GET, not a LIST of every node's)."""
    reports = agentreports.read_one(api, node) if node else agentreports.read_all(api)
    return {
        node: tuple(
            stuck.ReportedGpu(g.index, g.mig_mode == report.MIG_ENABLED, len(g.mig_devices))
            for g in node_report.gpus
            if g.index is not None
        )
        for node, node_report in reports.items()
    }


def node_mig(
    facts: NodeFacts,
    reported: Mapping[str, Sequence[stuck.ReportedGpu]],
    api: cluster.Api | None = None,
) -> stuck.NodeMig:
    """The node as kubectl_gpu.mig.stuck judges it; with `api`, a pending node's actuator pod
    is looked for (one read per pending node)."""
    node = stuck.NodeMig(facts.name, facts.labels, facts.annotations, reported.get(facts.name))
    return with_actuator(api, node, facts.actuator)


def with_actuator(
    api: cluster.Api | None, node: stuck.NodeMig, actuator: Actuator
) -> stuck.NodeMig:
    """Who acts on the node, and (with `api`, only while a change is pending) whether its
    pod runs there."""
    operator = actuator is Actuator.OPERATOR
    who = "the GPU Operator's MIG manager" if operator else "the kubectl-gpu agent"
    runs = None
    if api is not None and stuck.pending_label(node.labels):
        selector = silence.MIG_MANAGER_SELECTOR if operator else silence.AGENT_SELECTOR
        runs = _runs_on(api, node.name, selector)
    return dataclasses.replace(node, actuator=who, actuator_runs=runs)


def _runs_on(api: cluster.Api, node: str, selector: str) -> bool | None:
    field = f"spec.nodeName={node}"
    try:
        pods = list(api.list(cluster.path("pods"), label_selector=selector, field_selector=field))
    except errors.ClusterError as e:
        if e.status != 403:
            raise
        return None  # may not read pods: unknown, never "not running"
    return any((p.get("status") or {}).get("phase") == "Running" for p in pods)
