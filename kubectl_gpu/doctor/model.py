"""The verdicts `kubectl gpu doctor` returns: one `Diagnosis` per problem found.

Owns `Diagnosis` (layer, severity, object, message, evidence, fix), the order of the layers a
GPU pod passes through (admission → scheduler → dra → kubelet → runtime → driver) and of severities.
Distinct from kubectl_gpu.findings, which locates problems in files; a diagnosis names an object
in the cluster and the layer that failed. Pure: standard library only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, Literal

Layer = Literal["admission", "scheduler", "dra", "kubelet", "runtime", "driver"]
Severity = Literal["error", "warning", "info"]
LAYERS: tuple[Layer, ...] = ("admission", "scheduler", "dra", "kubelet", "runtime", "driver")
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    """One problem at one layer, on one object, with what shows it and what to do."""

    layer: Layer
    severity: Severity
    object: str  # kubectl style: pod/NAME, node/NAME, resourcequota/NAME
    message: str
    evidence: tuple[str, ...] = ()
    fix: str = ""

    def to_dict(self) -> dict[str, Any]:
        """As schemas/doctor-result.v1.json describes one diagnosis."""
        return {
            "layer": self.layer,
            "severity": self.severity,
            "object": self.object,
            "message": self.message,
            "evidence": list(self.evidence),
            "fix": self.fix,
        }


def has_errors(found: Iterable[Diagnosis]) -> bool:
    return any(d.severity == "error" for d in found)


def ordered(found: Iterable[Diagnosis]) -> tuple[Diagnosis, ...]:
    """Layer order first (the order of investigation), then severity, keeping rule order."""
    return tuple(sorted(found, key=lambda d: (LAYERS.index(d.layer), SEVERITIES.index(d.severity))))
