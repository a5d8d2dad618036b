"""Which ConfigMap key a node's device plugin reads: config-manager's choice, as data.

Owns config-manager's algorithm (docs/upstream-facts.md P3.2): the node label
`nvidia.com/device-plugin.config` must name an existing key; without it DEFAULT_CONFIG must
exist; otherwise the fallbacks `named` (a key called `default`), `single` (exactly one key) and
`empty` (no config file: the plugin's defaults) are tried in order. Must not decide what to
change (plan.py does). Pure: standard library and kubectl_gpu.keys only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping

from kubectl_gpu import keys

EMPTY = ""  # the `empty` fallback: the plugin's defaults (docs/upstream-facts.md P1.6)


@dataclasses.dataclass(frozen=True)
class Selection:
    """The key a node reads (EMPTY for none), how it was chosen, or why config-manager fails."""

    key: str
    how: str  # label | default | named | single | empty | none
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


def select(
    labels: Mapping[str, str],
    available: Collection[str],
    default_key: str,
    fallbacks: Collection[str],
) -> Selection:
    """config-manager's choice for a node with `labels`, given the ConfigMap's keys."""
    if not available:
        return Selection(EMPTY, "none", "no configuration files available")
    label = labels.get(keys.DEVICE_PLUGIN_CONFIG_LABEL)
    if label is not None:
        if label in available:
            return Selection(label, "label")
        return Selection(label, "label", f"specified config {label} does not exist")
    if default_key:
        if default_key in available:
            return Selection(default_key, "default")
        return Selection(default_key, "default", f"specified config {default_key} does not exist")
    return _fallback(available, fallbacks)


def _fallback(available: Collection[str], fallbacks: Collection[str]) -> Selection:
    for strategy in fallbacks:
        if strategy == "named" and keys.DEFAULT_CONFIG_KEY in available:
            return Selection(keys.DEFAULT_CONFIG_KEY, "named")
        if strategy == "single" and len(available) == 1:
            return Selection(next(iter(available)), "single")
        if strategy == "empty":
            return Selection(EMPTY, "empty")
    return Selection(
        EMPTY, "none", "no config was set, no default was provided, and all fallbacks failed"
    )
