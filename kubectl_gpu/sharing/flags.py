"""The `flags.plugin` and `flags.gfd` sections of a device-plugin config.

Owns the rules about the device plugin's and GFD's own settings that the schema cannot
express: options only newer releases understand, a comma-joined deviceListStrategy, and a
sleepInterval GFD reads as nanoseconds. Must not check migStrategy or mpsRoot (the sharing
blocks' rules use them). Pure: standard library and kubectl_gpu.findings only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubectl_gpu.findings import Finding
from kubectl_gpu.sharing import catalogue

_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")


def check_plugin(plugin: Mapping[str, Any]) -> Iterator[Finding]:
    """Findings about `flags.plugin`."""
    path = ("flags", "plugin")
    if plugin.get("sharedDevicesAllocationPolicy") in ("distributed", "packed"):
        where = (*path, "sharedDevicesAllocationPolicy")
        yield catalogue.find("sharing.allocation-policy-version", where)
    value = plugin.get("deviceListStrategy")
    if isinstance(value, str) and "," in value:
        names = [part.strip() for part in value.split(",")]
        if all(name in _LIST_STRATEGIES for name in names):  # otherwise the schema reports it
            where = (*path, "deviceListStrategy")
            joined = ", ".join(names)
            yield catalogue.find("sharing.device-list-comma", where, value=value, names=joined)


def check_sleep_interval(value: object) -> Iterator[Finding]:
    """Findings about `flags.gfd.sleepInterval`."""
    path = ("flags", "gfd", "sleepInterval")
    if value == "infinite":
        yield catalogue.find("sharing.sleep-interval-version", path)
    elif isinstance(value, int | float) and not isinstance(value, bool) and value < 1e9:
        yield catalogue.find("sharing.sleep-interval-nanoseconds", path, value=value)
