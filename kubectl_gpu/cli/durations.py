"""Durations as kubectl prints them (`45s`, `5m30s`, `3h`, `2d4h`): a report's age in `map`,
how long a pod has been idle in `top`. Must not read the clock (callers pass seconds)."""

from __future__ import annotations


def human(seconds: float | None) -> str | None:
    """An age as kubectl prints one: `45s`, `5m30s`, `3h`, `2d4h` (apimachinery HumanDuration)."""
    if seconds is None:
        return None
    s = int(seconds)
    minutes, hours, days = s // 60, s // 3600, s // 86400
    if s < 120:
        return f"{s}s"
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 192:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 730:
        return f"{days}d"
    years = days // 365
    return f"{years}y{days % 365}d" if years < 8 and days % 365 else f"{years}y"
