"""GPU nodes as `kubectl gpu share` sees them: labels, advertised resources, physical GPUs.

Owns reading a raw Node into a frozen `GpuNode`: which nodes have NVIDIA GPUs, the
`nvidia.com/*` capacity and allocatable as integers, the physical count GFD labels
(`<resource>.count`, docs/upstream-facts.md P2.3) or, for whole GPUs, the agent's report
counts, the compute capability (for MPS's
replica cap, docs/upstream-facts.md P1.7) and whether MIG is on (MPS refuses MIG devices). Must not
decide anything about a change (plan.py does). Pure: standard library and kubectl_gpu.keys only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kubectl_gpu import keys, numbers

NVIDIA_PREFIX = "nvidia.com/"
_MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
GPU = "nvidia.com/gpu"


@dataclasses.dataclass(frozen=True)
class GpuNode:
    """One node with NVIDIA GPUs, reduced to what sharing needs."""

    name: str
    labels: Mapping[str, str]
    capacity: Mapping[str, int]  # nvidia.com/* only
    allocatable: Mapping[str, int]  # nvidia.com/* only
    reported: int | None = None  # whole (non-MIG) GPUs the agent's report lists; None: none

    @classmethod
    def from_dict(cls, node: Mapping[str, Any], reported: int | None = None) -> GpuNode:
        """Read a raw Node object (as the API returns it); `reported`: the whole GPUs its
        agent's GPUNodeReport lists, when there is one."""
        meta = node.get("metadata") or {}
        status = node.get("status") or {}
        return cls(
            name=str(meta.get("name", "")),
            labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
            capacity=_nvidia_quantities(status.get("capacity")),
            allocatable=_nvidia_quantities(status.get("allocatable")),
            reported=reported,
        )

    @property
    def config_label(self) -> str | None:
        """The key this node's label selects, if it is labelled."""
        return self.labels.get(keys.DEVICE_PLUGIN_CONFIG_LABEL)

    def physical(self, resource: str) -> int | None:
        """GFD's count of physical devices behind `resource` (label `<resource>.count`), else
        for whole GPUs the agent's report (the bundle runs no GFD)."""
        text = self.labels.get(resource + keys.COUNT_LABEL_SUFFIX)
        if text is not None:
            return numbers.whole(text)
        return self.reported or None if resource == GPU else None

    @property
    def compute_capability(self) -> tuple[int, int] | None:
        """(major, minor) from GFD's labels, when present."""
        major = numbers.whole(self.labels.get(keys.GPU_COMPUTE_MAJOR_LABEL, ""))
        minor = numbers.whole(self.labels.get(keys.GPU_COMPUTE_MINOR_LABEL, ""))
        return None if major is None or minor is None else (major, minor)

    @property
    def mig_enabled(self) -> bool:
        """Whether any GPU here is in MIG mode, as far as labels and resources tell."""
        if any(r.startswith(_MIG_RESOURCE_PREFIX) and n > 0 for r, n in self.capacity.items()):
            return True
        product = self.labels.get(keys.GPU_PRODUCT_LABEL, "")
        wanted = self.labels.get(keys.MIG_CONFIG_LABEL, "all-disabled")
        return "-MIG-" in product or wanted not in ("all-disabled", "")


def is_gpu_node(node: Mapping[str, Any]) -> bool:
    """Whether a raw Node has NVIDIA GPUs (advertised, or labelled by NFD/GFD/the operator)."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    if labels.get(keys.GPU_PRESENT_LABEL) == "true":
        return True
    if any(k.startswith(NVIDIA_PREFIX) and k.endswith(keys.COUNT_LABEL_SUFFIX) for k in labels):
        return True
    capacity = (node.get("status") or {}).get("capacity") or {}
    return any(str(k).startswith(NVIDIA_PREFIX) for k in capacity)


def _nvidia_quantities(values: object) -> dict[str, int]:
    if not isinstance(values, Mapping):
        return {}
    return {str(k): _quantity(v) for k, v in values.items() if str(k).startswith(NVIDIA_PREFIX)}


def _quantity(value: object) -> int:
    """Extended resources are whole numbers ("4"); anything else reads as 0."""
    return numbers.whole(value) or 0
