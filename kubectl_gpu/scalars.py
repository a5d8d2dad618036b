"""Plain YAML scalars as Go's YAML parser reads them, where PyYAML reads them otherwise.

The device plugin and mig-parted parse YAML with sigs.k8s.io/yaml, a fork of Go's yaml.v2,
which resolves a few plain (unquoted) scalars differently from PyYAML: `y`/`n` are booleans,
`1e3` is a number, `0o17` is octal, and `1:30` (YAML 1.1 base 60) is a string. Reading them as
upstream does keeps `validate` from accepting what the plugin refuses or refusing what it
accepts. Owns only that resolution; the YAML-level findings are `documents.py`'s.
Pure: standard library only.
"""

from __future__ import annotations

import re

# yaml.v2 resolve.go: a plain scalar is a float when it matches this (after dropping '_').
_GO_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_GO_BOOLEANS = {"y": True, "Y": True, "n": False, "N": False}
_SIGN_DIGIT = re.compile(r"[-+]?[0-9]")
_INT64 = (-(2**63), 2**64 - 1)  # yaml.v2 reads an int as int64, or uint64 when positive


class Unchanged:
    """Marker: Go reads the scalar as PyYAML does."""


UNCHANGED = Unchanged()


def go_plain(text: str, pyyaml_tag: str) -> object:
    """The value Go's yaml.v2 gives the plain scalar `text`, or UNCHANGED when PyYAML agrees.

    `pyyaml_tag` is the short tag PyYAML resolved (`str`, `int`, `float`, ...).
    """
    if pyyaml_tag == "str" and text in _GO_BOOLEANS:
        return _GO_BOOLEANS[text]
    if pyyaml_tag not in ("str", "int") or not _SIGN_DIGIT.match(text):
        return UNCHANGED
    number = _go_number(text.replace("_", ""))
    if number is None:
        return text if pyyaml_tag == "int" else UNCHANGED  # e.g. 1:30, a string to Go
    return number if pyyaml_tag == "str" else UNCHANGED


def _go_number(plain: str) -> int | float | None:
    value: int | None
    try:
        value = int(plain, 0)  # Go's ParseInt(s, 0, 64): 0x, 0o, 0b prefixes
    except ValueError:
        value = _legacy_octal(plain)
    if value is not None and _INT64[0] <= value <= _INT64[1]:
        return value
    if _GO_FLOAT.fullmatch(plain):
        return float(plain)
    return None


def _legacy_octal(plain: str) -> int | None:
    """Go's base-0 parsing reads a leading 0 as octal (010 is 8), as PyYAML does."""
    digits = plain.lstrip("+-")
    if len(digits) > 1 and digits.startswith("0") and digits.isdigit():
        try:
            value = int(digits, 8)
        except ValueError:
            return None
        return -value if plain.startswith("-") else value
    return None
