"""Kubernetes resource quantities (`10Gi`, `512M`, `1e9`, `1073741824`) as exact numbers.

The DRA driver turns MPS pinned-memory limits into whole megabytes (value // 1Mi) and
rejects a limit that comes to 0, so the value has to be exact, not a float. Pure: standard
library only.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

MEBIBYTE = 1024 * 1024
MAX_EXPONENT = 64  # bounded input: 1e99999999 would be a 100-million-digit number
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([eE][+-]?[0-9]+|[A-Za-z]*)$")


def parse(text: object) -> Fraction | None:
    """The quantity's value, or None when `text` is not a quantity."""
    if isinstance(text, bool):
        return None
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        return Fraction(text) if math.isfinite(text) else None  # YAML .inf / .nan
    match = _QUANTITY.match(str(text).strip()) if isinstance(text, str) else None
    if not match:
        return None
    number, suffix = Fraction(match.group(1)), match.group(2)
    if suffix in _BINARY:
        return number * Fraction(1024) ** _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * Fraction(10) ** _DECIMAL[suffix]
    if suffix[:1] in ("e", "E") and abs(int(suffix[1:])) <= MAX_EXPONENT:
        return number * Fraction(10) ** int(suffix[1:])
    return None


def whole_mebibytes(value: Fraction) -> int:
    """What the driver hands MPS: the value in bytes (rounded up, as Kubernetes does), then
    in whole MiB (rounded down)."""
    return math.ceil(value) // MEBIBYTE


def format_binary(value: Fraction) -> str:
    """A whole number of bytes in the largest binary unit that divides it (80Gi, 512Mi);
    a plain count (multiprocessors) when it is not a multiple of 1Ki."""
    whole = math.ceil(value)
    for suffix, power in sorted(_BINARY.items(), key=lambda kv: -kv[1]):
        unit = 1024**power
        if whole and whole % unit == 0:
            return f"{whole // unit}{suffix}"
    return str(whole)
