"""Writing a config (plain data) as YAML text, in the many spellings YAML allows.

A `Style` says which spellings to use: key case (Unicode folding included), null for absent
keys, YAML 1.1 booleans, other number forms (Unicode digits, tags, `.4e1`), merge keys (<<)
and merge lists with decoys, one anchor defined many times, keys YAML reads as non-strings,
a special float, and a second document. Each one
keeps the meaning for some readers and changes it for others; the differential tests let
upstream's own code decide which.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9./_-]*")
_RESERVED = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}
# Names YAML 1.1 reads as another type when written plain: a bool, a number, null.
BARE_NAMES = ("on", "off", "yes", "y", "1.0", "0x10", "010", "~", "null")
TRUE_WORDS = ("true", "True", "TRUE", "yes", "Yes", "on", "ON", "y", "Y")
FALSE_WORDS = ("false", "False", "no", "NO", "off", "Off", "n", "N")


@dataclasses.dataclass(frozen=True)
class Style:
    """How to spell each part of a config; the choices are drawn per document."""

    key_case: dict[tuple[Any, ...], str] = dataclasses.field(default_factory=dict)  # path -> key
    nulls: dict[tuple[Any, ...], str] = dataclasses.field(default_factory=dict)  # path -> spelling
    booleans: tuple[int, ...] = ()  # index into TRUE_WORDS / FALSE_WORDS, cycled
    numbers: tuple[str, ...] = ()  # spelling per integer met, cycled: dec hex oct under float exp
    merges: dict[tuple[Any, ...], tuple[int, bool]] = dataclasses.field(default_factory=dict)
    # how a merge is written: "map" (<<: {...}), "list" (<<: [base, decoy]: the earlier wins
    # in Go), "before" (a key written before the merge, which then overrides it in Go)
    merge_form: str = "map"
    second_document: str = ""  # "" none, "same" the config again, "broken" an invalid one
    anchors: bool = False  # every string value anchored as &a: one anchor defined many times
    bare_keys: bool = False  # write keys like on, 1.0, ~ plain (YAML reads them as non-strings)
    special_float: tuple[Any, ...] | None = None  # a mapping that gets an extra `x: .inf`


def to_yaml(data: Any, style: Style | None = None) -> str:
    writer = _Writer(style or Style())
    body = writer.document(data)
    if writer.style.second_document == "same":
        body += "---\n" + to_yaml(data)
    elif writer.style.second_document == "broken":
        body += "---\nversion: v2\nflags: {migStrategy: 7, x: .inf}\nmig-configs: ~\n"
    return body


class _Writer:
    def __init__(self, style: Style) -> None:
        self.style = style
        self._booleans = 0
        self._numbers = 0

    def document(self, data: Any) -> str:
        if isinstance(data, dict) and data:
            return "".join(line + "\n" for line in self._mapping(data, (), 0))
        return (
            self.scalar(data) + "\n"
            if not isinstance(data, dict | list)
            else json.dumps(data) + "\n"
        )

    def _mapping(self, data: dict[Any, Any], path: tuple[Any, ...], indent: int) -> list[str]:
        pad = " " * indent
        lines: list[str] = []
        explicit = dict(data)
        if path in self.style.merges and data:
            lines.extend(self._merge(data, path, explicit, pad))
        if self.style.special_float == path:
            lines.append(f"{pad}x-note: .inf")
        for key, value in explicit.items():
            spelt = self._key(self.style.key_case.get((*path, key), key))
            lines.extend(self._entry(f"{pad}{spelt}:", value, (*path, key), indent))
        for (*parent, key), spelling in self.style.nulls.items():
            if tuple(parent) == path and key not in data:
                lines.append(f"{pad}{self._key(key)}:{spelling}")
        return lines

    def _merge(
        self, data: dict[Any, Any], path: tuple[Any, ...], explicit: dict[Any, Any], pad: str
    ) -> list[str]:
        """Move some keys into a merge (<<), with decoys Go's yaml.v2 lets lose, or not."""
        moved, decoy = self.style.merges[path]
        keys = list(data)
        base = {k: data[k] for k in keys[: max(1, moved % (len(keys) + 1))]}
        for k in base:
            del explicit[k]
        anchor = "&a " if self.style.anchors else ""
        if self.style.merge_form == "list":
            decoys = {k: _decoy(v) for k, v in base.items()}
            return [f"{pad}<<: [{anchor}{json.dumps(base)}, {json.dumps(decoys)}]"]
        if self.style.merge_form == "before" and base:
            # the key is written first, then a merge that sets it again: Go keeps the merge's
            key, value = next(iter(base.items()))
            line = self._entry(f"{pad}{self._key(key)}:", _decoy(value), (*path, key), len(pad))
            return [*line, f"{pad}<<: {anchor}{json.dumps(base)}"]
        if decoy and explicit:
            first = next(iter(explicit))
            base[first] = _decoy(explicit[first])
        return [f"{pad}<<: {anchor}{json.dumps(base)}"]

    def _entry(self, head: str, value: Any, path: tuple[Any, ...], indent: int) -> list[str]:
        if isinstance(value, dict) and value:
            return [head, *self._mapping(value, path, indent + 2)]
        if isinstance(value, list) and value:
            return [head, *self._sequence(value, path, indent + 2)]
        if isinstance(value, dict | list):
            return [f"{head} {json.dumps(value)}"]
        return [f"{head} {self.scalar(value)}"]

    def _sequence(self, data: list[Any], path: tuple[Any, ...], indent: int) -> list[str]:
        pad = " " * indent
        lines: list[str] = []
        for index, item in enumerate(data):
            if isinstance(item, dict | list) and item:
                lines.append(f"{pad}-")
                inner = self._mapping if isinstance(item, dict) else self._sequence
                lines.extend(inner(item, (*path, index), indent + 2))  # type: ignore[operator]
            elif isinstance(item, dict | list):
                lines.append(f"{pad}- {json.dumps(item)}")
            else:
                lines.append(f"{pad}- {self.scalar(item)}")
        return lines

    def _key(self, key: Any) -> str:
        text = str(key)
        if self.style.bare_keys and text in BARE_NAMES:
            return text
        return (
            text if _PLAIN.fullmatch(text) and text.lower() not in _RESERVED else json.dumps(text)
        )

    def scalar(self, value: Any) -> str:
        if value is None:
            return "null"
        if isinstance(value, bool):
            return self._boolean(value)
        if isinstance(value, int):
            return self._integer(value)
        if isinstance(value, float):
            if value != value:
                return ".nan"
            return repr(value) if abs(value) != float("inf") else ("-.inf" if value < 0 else ".inf")
        text = str(value)
        anchor = "&a " if self.style.anchors else ""
        if _PLAIN.fullmatch(text) and text.lower() not in _RESERVED:
            return anchor + text
        return anchor + json.dumps(text)

    def _boolean(self, value: bool) -> str:
        if not self.style.booleans:
            return "true" if value else "false"
        choice = self.style.booleans[self._booleans % len(self.style.booleans)]
        self._booleans += 1
        words = TRUE_WORDS if value else FALSE_WORDS
        return words[choice % len(words)]

    def _integer(self, value: int) -> str:
        if not self.style.numbers:
            return str(value)
        form = self.style.numbers[self._numbers % len(self.style.numbers)]
        self._numbers += 1
        negative, digits = value < 0, str(abs(value))
        sign = "-" if negative else ""
        spelt = {
            "hex": f"{sign}0x{abs(value):x}",
            "oct": f"{sign}0o{abs(value):o}",
            "under": sign + "_".join(digits[i : i + 2] for i in range(0, len(digits), 2)),
            "float": f"{value}.0",
            "exp": f"{value}e0",
            "dotexp": f"{sign}.{digits}e{len(digits)}",  # .4e1: a number to Go, not to PyYAML
            "tagstr": f"!!str {value}",  # a string to both
            "tagint": f"!!int {value}",
            "fullwidth": sign + digits[:-1] + chr(0xFF10 + int(digits[-1])),  # 1１: a string
            "arabic": sign + "".join(chr(0x0660 + int(d)) for d in digits),  # ٤: a string
        }
        return spelt.get(form, str(value)) if abs(value) < 2**53 else str(value)


def _decoy(value: Any) -> Any:
    """A different value of the same kind, for a merged key the mapping then overrides."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 7
    if isinstance(value, str):
        return value + "-decoy"
    return "decoy"
