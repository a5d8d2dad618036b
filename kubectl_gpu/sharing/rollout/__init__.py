"""Planning a sharing rollout: `kubectl gpu share`, `share off`, `share rollback`, `share show`.

Owns the decisions behind the share command, as data: which key each GPU node reads
(`selection`), the planner's inputs (`state`, `nodes`), the request and its checks (`request`),
what it wants written (`targets`, with key names from `keynames`; a rollback's: `rollback`),
the checked plan with its expected capacities and refusals (`plan`), the rollback
record (`record`) and the per-node survey (`status`). Must not do I/O: the workflow
(kubectl_gpu.workflows.share.change) reads the cluster, calls these, validates and writes. Pure.
"""

from __future__ import annotations

from kubectl_gpu.sharing.rollout.nodes import GpuNode, is_gpu_node
from kubectl_gpu.sharing.rollout.plan import (
    KeyChange,
    LabelChange,
    NodePlan,
    Plan,
    PolicyChange,
    Target,
)
from kubectl_gpu.sharing.rollout.record import (
    History,
    Record,
    RecordTooLarge,
    decode,
    depth,
    pop,
    push,
)
from kubectl_gpu.sharing.rollout.request import ShareRequest, check_request
from kubectl_gpu.sharing.rollout.rollback import rollback
from kubectl_gpu.sharing.rollout.selection import EMPTY, Selection, select
from kubectl_gpu.sharing.rollout.state import ClusterState, ConfigMapState, Doc, ShareRefused
from kubectl_gpu.sharing.rollout.status import NodeStatus, PluginPod, survey
from kubectl_gpu.sharing.rollout.targets import make

__all__ = [
    "EMPTY",
    "ClusterState",
    "ConfigMapState",
    "Doc",
    "GpuNode",
    "KeyChange",
    "LabelChange",
    "NodePlan",
    "NodeStatus",
    "Plan",
    "PluginPod",
    "PolicyChange",
    "History",
    "Record",
    "RecordTooLarge",
    "Selection",
    "ShareRefused",
    "ShareRequest",
    "Target",
    "check_request",
    "decode",
    "depth",
    "pop",
    "push",
    "is_gpu_node",
    "make",
    "rollback",
    "select",
    "survey",
]
