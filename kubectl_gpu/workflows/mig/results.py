"""What `kubectl gpu mig apply` answers: one row per node, and the objects written.

Owns `NodeResult` (a node's outcome, changed in place as the apply goes through its steps),
`ApplyResult` and which results count as failures. Must not read or write the cluster.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kubectl_gpu.doctor.preview import Preview
from kubectl_gpu.mig.actuators import Actuator
from kubectl_gpu.mig.verdicts import ConfigVerdict
from kubectl_gpu.workflows.mig.request import ApplyRequest

Json = dict[str, Any]
OFFLINE_FAILURES = ("does-not-fit", "unknown-gpus", "refused")
OK_RESULTS = ("success", "requested", "would-apply")


@dataclasses.dataclass
class NodeResult:
    """One node's outcome."""

    node: str
    actuator: Actuator
    gpus: str
    result: str
    reason: str = ""
    request: str = ""
    resources: dict[str, int] = dataclasses.field(default_factory=dict)
    seconds: float | None = None
    layout: dict[str, str] = dataclasses.field(default_factory=dict)
    verdict: ConfigVerdict | None = None

    @property
    def failed(self) -> bool:
        return self.result not in OK_RESULTS


@dataclasses.dataclass
class ApplyResult:
    """Every node's outcome, and the objects written (or that a dry run would write)."""

    request: ApplyRequest
    key: str
    nodes: list[NodeResult]
    objects: list[Json]
    written: bool
    preview: Preview | None = None  # who the change hits, capacity before → after

    @property
    def failed(self) -> bool:
        return any(n.failed for n in self.nodes)
