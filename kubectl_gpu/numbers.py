"""Whole numbers read from text others wrote: labels, quantities, annotations, reports.

Owns `whole`, the one reader of such numbers. Kubernetes labels and quantities are text, and a
hostile or broken writer can put anything there: `"²"` passes `str.isdigit` but not `int`, and
5,000 digits make `int` raise (Python refuses over 4,300) or spend quadratic time. No count,
index or quantity we read needs more than 18 digits. Pure: standard library only.
"""

from __future__ import annotations

MAX_DIGITS = 18  # below 2**63: every count the Kubernetes API and NVIDIA's tools use fits


def whole(text: object) -> int | None:
    """A non-negative whole number written in ASCII digits (at most MAX_DIGITS), else None."""
    if isinstance(text, bool):
        return None
    if isinstance(text, int):
        return text if 0 <= text < 10**MAX_DIGITS else None
    value = str(text).strip()
    if not value or len(value) > MAX_DIGITS or not (value.isascii() and value.isdigit()):
        return None
    return int(value)
