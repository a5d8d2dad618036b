"""Device-plugin sharing config (v1): the semantic rules, a typed model and the replica edit.

Owns what `schemas/device-plugin-config.v1.json` cannot say about NVIDIA's device-plugin/GFD
config file: replicas >= 2, resource-name normalisation and format, duplicate and no-op
resources, the MPS limits, the keys upstream parses and then ignores, and version caveats
(docs/upstream-facts.md P1, P8). One module per noun: `rules` (check(), the entry
point), `catalogue` (every rule's code, severity, message and hint), `strategies` (the
sharing blocks), `names` (resource names), `devices`, `flags`, `imex`, `document` (reading
plain values), `model` (the typed config) and `edits` (with_replicas, without_sharing).
This module only re-exports the API callers use.

Pure: no I/O, no clock, no third-party imports. It must not repeat a schema finding, and
it must not parse text (schema.py turns text into the plain dict checked here).
"""

from __future__ import annotations

from kubectl_gpu.sharing.catalogue import RULES
from kubectl_gpu.sharing.edits import with_replicas, without_sharing
from kubectl_gpu.sharing.model import (
    DevicePluginConfig,
    DeviceRef,
    Devices,
    SharedResource,
    Sharing,
    SharingStrategy,
    Strategy,
)
from kubectl_gpu.sharing.names import (
    DEFAULT_RESOURCE,
    MAX_RESOURCE_NAME_LENGTH,
    RESOURCE_PREFIX,
    SHARED_SUFFIX,
    normalise_resource_name,
)
from kubectl_gpu.sharing.rules import check
from kubectl_gpu.sharing.strategies import (
    MIN_REPLICAS,
    MPS_MAX_REPLICAS,
    MPS_MAX_REPLICAS_OLD_GPU,
    TIME_SLICING_REPLICAS_WARNING,
)

__all__ = [
    "DEFAULT_RESOURCE",
    "MAX_RESOURCE_NAME_LENGTH",
    "MIN_REPLICAS",
    "MPS_MAX_REPLICAS",
    "MPS_MAX_REPLICAS_OLD_GPU",
    "RESOURCE_PREFIX",
    "RULES",
    "SHARED_SUFFIX",
    "TIME_SLICING_REPLICAS_WARNING",
    "DevicePluginConfig",
    "DeviceRef",
    "Devices",
    "SharedResource",
    "Sharing",
    "SharingStrategy",
    "Strategy",
    "check",
    "normalise_resource_name",
    "with_replicas",
    "without_sharing",
]
