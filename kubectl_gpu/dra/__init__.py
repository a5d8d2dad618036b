"""The DRA plane: NVIDIA GPUs handed out through `resource.k8s.io` (Dynamic Resource Allocation).

Owns the facts and rules about DRA objects as users write them (ResourceClaim,
ResourceClaimTemplate, DeviceClass in v1, v1beta2 and v1beta1) and about the NVIDIA DRA
driver's opaque sharing configs (`resource.nvidia.com/v1beta1` GpuConfig, MigDeviceConfig).
`check()` is what `kubectl gpu validate` runs on one such object. Pure: standard library only
(CEL evaluation lives behind an adapter, outside this package).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubectl_gpu.dra import configs, shape
from kubectl_gpu.dra.catalogue import RULES
from kubectl_gpu.dra.classes import catalogue
from kubectl_gpu.dra.objects import is_dra
from kubectl_gpu.findings import Finding

__all__ = ["RULES", "catalogue", "check", "is_dra"]


def check(data: Mapping[str, Any], classes: Mapping[str, str]) -> list[Finding]:
    """Every finding about one DRA object; `classes` maps DeviceClass names to the device type
    they select (see `catalogue`), to catch a config aimed at the wrong kind of device."""
    if data.get("kind") == "DeviceClass":
        return shape.check_class(data) + configs.check_class(data)
    return shape.check_claim(data) + configs.check_claim(data, classes)
