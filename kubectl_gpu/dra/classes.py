"""Which kind of NVIDIA device a DeviceClass selects: a whole GPU, a MIG device, or a GPU
bound to vfio-pci.

The NVIDIA DRA driver's Helm chart installs `gpu.nvidia.com` (selector
`device.attributes['gpu.nvidia.com'].type == 'gpu'`), `mig.nvidia.com` (`type == 'mig'`) and
`vfio.gpu.nvidia.com`; a class of the user's own is read from the same `type` comparison in
its CEL selectors. Must not evaluate CEL (that is the adapter's job, and only `doctor` needs
it): a regular expression over the expression text is enough to read this one comparison.
Pure: standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from kubectl_gpu.dra import objects

GPU, MIG, VFIO = "gpu", "mig", "vfio"
# The config kind the driver applies to each device type, for hints.
CONFIG_FOR = {GPU: "GpuConfig", MIG: "MigDeviceConfig", VFIO: "VfioDeviceConfig"}
DEVICE_FOR = {config: device for device, config in CONFIG_FOR.items()}

KNOWN: dict[str, str] = {
    "gpu.nvidia.com": GPU,
    "mig.nvidia.com": MIG,
    "vfio.gpu.nvidia.com": VFIO,
}

_TYPE_TEST = re.compile(
    r"""attributes\[\s*['"]gpu\.nvidia\.com['"]\s*\]\s*\.\s*type\s*==\s*['"](\w+)['"]"""
)


def device_kind(class_object: Mapping[str, Any]) -> str | None:
    """The device type a DeviceClass object selects, from its name or CEL selectors."""
    name = str(objects.at(class_object, ("metadata", "name")) or "")
    selectors = objects.at(class_object, ("spec", "selectors"))
    expressions = [
        str(objects.at(s, ("cel", "expression")) or "")
        for s in (selectors if isinstance(selectors, list) else [])
    ]
    return from_expressions(expressions) or KNOWN.get(name)


def from_expressions(expressions: Iterable[str]) -> str | None:
    """The single device type the expressions compare `type` with, or None when none or many."""
    types = {m for e in expressions for m in _TYPE_TEST.findall(e)}
    return types.pop() if len(types) == 1 else None


def catalogue(documents: Iterable[Any]) -> dict[str, str]:
    """Class name -> device type: the chart's classes plus DeviceClasses found in `documents`."""
    found = dict(KNOWN)
    for data in documents:
        if objects.is_dra(data) and data.get("kind") == objects.CLASS:
            name = objects.at(data, ("metadata", "name"))
            kind = device_kind(data)
            if isinstance(name, str) and kind:
                found[name] = kind
    return found
