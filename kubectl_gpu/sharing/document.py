"""Reading a plain device-plugin config document the way upstream decodes it.

Owns the small readers every section's rules and the model share: a mapping or nothing, a
whole number as Go's JSON decoding sees it, and the `flags` sections. They return None or an
empty mapping for a value of the wrong type (the schema pass reports those) and never raise.
Must not judge a value (no findings here). Pure: standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def mapping(value: object) -> Mapping[str, Any] | None:
    """`value` when it is a mapping, else None."""
    return value if isinstance(value, Mapping) else None


def whole_number(value: object) -> int | None:
    """An int as upstream's JSON decoding sees it: 4 and 4.0 alike; never a boolean."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def flags(doc: Mapping[str, Any], *section: str) -> Mapping[str, Any]:
    """`flags` (or `flags.plugin`, `flags.gfd`) when it is a mapping, else empty."""
    found = mapping(doc.get("flags")) or {}
    for key in section:
        found = mapping(found.get(key)) or {}
    return found
