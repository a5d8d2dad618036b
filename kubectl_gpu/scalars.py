"""Plain YAML scalars as Go's YAML parser reads them, where PyYAML reads them otherwise.

The device plugin and mig-parted parse YAML with sigs.k8s.io/yaml, a fork of Go's yaml.v2,
which resolves a few plain (unquoted) scalars differently from PyYAML: `y`/`n` are booleans,
`1e3` is a number, `0o17` is octal, and `1:30` (YAML 1.1 base 60) is a string. Reading them as
upstream does keeps `validate` from accepting what the plugin refuses or refusing what it
accepts. Owns only that resolution; the YAML-level findings are `documents/`'s.
Pure: standard library only.
"""

from __future__ import annotations

import re

# yaml.v2 resolve.go: a plain scalar is a float when it matches this (after dropping '_').
_GO_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_GO_BOOLEANS = {"y": True, "Y": True, "n": False, "N": False}
_SIGN_DIGIT = re.compile(r"[-+]?\.?[0-9]")  # `.4e1` is a number to Go, a string to PyYAML
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
    if not plain.isascii():
        return None  # Python's int() and float() read `1１` and `٤`; Go reads ASCII digits only
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


def go_parse_uint(text: str, bits: int) -> int | None:
    """Go's strconv.ParseUint(text, 0, bits), or None where Go returns an error.

    Base 0: `0x`, `0o`, `0b` prefixes, a leading `0` alone meaning octal (`010` is 8), and
    underscores between digits (or after a prefix); ASCII only, no sign, no spaces. Python's
    int(text, 0) differs on each of the last three points.
    """
    digits, base = text, 10
    if text[:1] == "0":
        prefix = text[1:2].lower()
        if len(text) >= 3 and prefix in _BASES:
            digits, base = text[2:], _BASES[prefix]
        else:
            digits, base = text[1:], 8
    if not text or not text.isascii() or ("_" in text and not _underscores_ok(text)):
        return None
    value = 0
    for char in digits:
        if char == "_":
            continue
        digit = int(char, 36) if char.isalnum() else base
        if digit >= base:
            return None
        value = value * base + digit
    return value if value < 2**bits else None


_BASES = {"x": 16, "o": 8, "b": 2}


def _underscores_ok(text: str) -> bool:
    """Go's underscoreOK: each `_` sits between digits, or between a base prefix and a digit."""
    saw, rest, is_hex = "^", text, False
    if len(text) >= 2 and text[0] == "0" and text[1].lower() in _BASES:
        saw, rest, is_hex = "0", text[2:], text[1].lower() == "x"
    for char in rest:
        if char.isdigit() or (is_hex and char.lower() in "abcdef"):
            saw = "0"
        elif char == "_":
            if saw != "0":
                return False
            saw = "_"
        elif saw == "_":
            return False
        else:
            saw = "!"
    return saw != "_"


def go_key(text: str, pyyaml_tag: str) -> str | None:
    """The JSON name sigs.k8s.io/yaml gives a plain mapping key, or None for a null key.

    Go's yaml.v2 resolves keys like values (`on` is true, `0x10` is 16, `1.0` is 1.0); the
    JSON conversion then spells a bool `true`/`false`, an int in decimal and a float with
    strconv.FormatFloat(f, 'g', -1, 32), and refuses a null key.
    """
    if pyyaml_tag == "null":
        return None
    if pyyaml_tag == "bool":
        return "true" if text.lower() in ("yes", "true", "on") else "false"
    value: object = go_plain(text, pyyaml_tag)
    if isinstance(value, Unchanged) and pyyaml_tag in ("int", "float"):
        special = _SPECIAL_FLOATS.get(text.lstrip("+").lower())
        value = special if special is not None else _go_number(text.replace("_", ""))
    if value is None or isinstance(value, Unchanged):
        return text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        shown = _go_float32(value)
        return _SPECIAL_KEYS.get(shown, shown)
    return str(value)


_FLOAT32_MAX = 3.4028234663852886e38
_SPECIAL_FLOATS = {".inf": float("inf"), "-.inf": float("-inf"), ".nan": float("nan")}
# sigs.k8s.io/yaml names a special float key as YAML spells it, not as FormatFloat does
_SPECIAL_KEYS = {"+Inf": ".inf", "-Inf": "-.inf", "NaN": ".nan"}


def _go_float32(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 32): the shortest digits that survive float32."""
    import math
    import struct

    if math.isnan(value):
        return "NaN"
    if math.isinf(value) or abs(value) > _FLOAT32_MAX:  # float32(1e100) is +Inf in Go
        return "+Inf" if value > 0 else "-Inf"
    single = struct.unpack("f", struct.pack("f", value))[0]
    shown = f"{single:.8e}"
    for digits in range(1, 10):
        shown = f"{single:.{digits - 1}e}"
        if struct.unpack("f", struct.pack("f", float(shown)))[0] == single:
            break
    mantissa, exponent = shown.split("e")
    power = int(exponent)
    if power < -4 or power >= 6:
        mantissa = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa
        return f"{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}"
    fixed = repr(float(shown))
    return fixed[:-2] if fixed.endswith(".0") else fixed
