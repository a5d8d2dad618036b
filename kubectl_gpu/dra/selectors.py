"""CEL device selectors as text: the clauses a selector ANDs together, and the device
attributes each clause reads.

`doctor` evaluates each clause on its own (through the CEL adapter) to say which one no
published device satisfies; this module only takes the expression apart, respecting
parentheses, brackets and string literals, and never evaluates anything.
Pure: standard library only.
"""

from __future__ import annotations

import re

_ATTRIBUTE = re.compile(
    r"""device\s*\.\s*(attributes|capacity)\s*\[\s*(['"])([^'"]+)\2\s*\]\s*\.\s*(\w+)"""
)
_DRIVER = re.compile(r"device\s*\.\s*driver\b")
_OPEN, _CLOSE = "([{", ")]}"


def clauses(expression: str) -> list[str]:
    """The operands a selector ANDs together, outer parentheses removed: `a && (b && c)` is
    `[a, b, c]`; a clause holding `||` stays whole."""
    found = []
    for part in _split(expression):
        inner = part[1:-1].strip() if _wrapped(part) else ""
        found += clauses(inner) if inner else [part]
    return found


def _split(expression: str) -> list[str]:
    """Top-level `&&` operands, ignoring `&&` inside brackets or string literals."""
    parts, depth, quote, start, i = [], 0, "", 0, 0
    while i < len(expression):
        char = expression[i]
        if quote:
            i += 2 if char == "\\" else 1
            quote = "" if char == quote else quote
            continue
        if char in "'\"":
            quote = char
        elif char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth -= 1
        elif depth == 0 and expression.startswith("&&", i):
            parts.append(expression[start:i])
            start, i = i + 2, i + 1
        i += 1
    parts.append(expression[start:])
    return [p.strip() for p in parts if p.strip()]


def _wrapped(part: str) -> bool:
    """True for `( … )` whose first parenthesis closes at the very end."""
    if not (part.startswith("(") and part.endswith(")")):
        return False
    depth = 0
    for index, char in enumerate(part):
        depth += (char in _OPEN) - (char in _CLOSE)
        if depth == 0:
            return index == len(part) - 1
    return False


def attributes(clause: str) -> list[tuple[str, str, str]]:
    """(`attributes` | `capacity`, domain, name) for each device field the clause reads, and
    ("driver", "", "") when it reads `device.driver`."""
    found = [(m.group(1), m.group(3), m.group(4)) for m in _ATTRIBUTE.finditer(clause)]
    if _DRIVER.search(clause):
        found.append(("driver", "", ""))
    return list(dict.fromkeys(found))
