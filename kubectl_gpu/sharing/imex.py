"""The `imex` section of a device-plugin config.

Owns the one rule about IMEX the schema cannot express: upstream accepts only no channel or
channel 0, and reports anything else in Go's own `%v` form. Must not check other sections.
Pure: standard library and kubectl_gpu.findings only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubectl_gpu.findings import Finding
from kubectl_gpu.sharing import catalogue, document


def check(imex: Mapping[str, Any]) -> Iterator[Finding]:
    """Findings about `imex.channelIDs`."""
    ids = imex.get("channelIDs")
    if not isinstance(ids, list):
        return
    numbers = [document.whole_number(i) for i in ids]
    if None in numbers or numbers in ([], [0]):
        return  # valid, or an item of the wrong type, which the schema reports
    shown = "[" + " ".join(str(n) for n in numbers) + "]"  # Go's %v of a slice
    yield catalogue.find("sharing.imex-channel-ids", ("imex", "channelIDs"), ids=shown)
