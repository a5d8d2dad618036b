"""Writing a config (plain data) as YAML text, in the many spellings YAML allows.

A `Style` says which spellings to use: key case (Unicode folding included), null for absent
keys, YAML 1.1 booleans, other number forms (Unicode digits, tags, `.4e1`), merge keys (<<)
and merge lists with decoys, one anchor defined many times, keys YAML reads as non-strings,
a special float, a second document (the same, broken, not YAML, behind a directive),
directives, double-quoted escapes, explicit tags (`!`, local, verbatim, `!!binary`, `!!null`)
and the file's encoding (UTF-8 or UTF-16 with a BOM, two BOMs, a BOM on a later line or
before a later document: `to_bytes`). Each one
keeps the meaning for some readers and changes it for others; the differential tests let
upstream's own code decide which.
"""

from __future__ import annotations

import base64
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
    directive: str = ""  # a line before `---`: %YAML 1.1, %YAML 1.2, %TAG ..., %FOO
    escapes: tuple[str, ...] = ()  # per string met, cycled: how to write it double-quoted
    tags: tuple[str, ...] = ()  # per scalar met, cycled: the explicit tag to write
    encoding: str = ""  # to_bytes: "" UTF-8, or a key of ENCODINGS


DIRECTIVES = ("%YAML 1.1", "%YAML 1.2", "%YAML 1.0", "%TAG !e! tag:example.com,2000:", "%FOO x")
# How a string is written double-quoted: its '/' (else its first letter) as an escape; `\/`
# is YAML 1.2 only, `\'` is YAML 1.1 only (it adds an apostrophe, so the string changes).
ESCAPES = ("slash", "hex", "u4", "u8", "apostrophe")
TAGS = ("bare", "local", "verbatim", "binary", "null", "core")
ENCODINGS = ("utf-8-bom", "utf-16-le", "utf-16-be", "two-boms", "bom-later-line", "bom-later-doc")


def to_yaml(data: Any, style: Style | None = None) -> str:
    writer = _Writer(style or Style())
    body = writer.document(data)
    if writer.style.directive:
        body = f"{writer.style.directive}\n---\n{body}"
    second = writer.style.second_document
    if second == "same":
        body += "---\n" + to_yaml(data)
    elif second == "broken":
        body += "---\nversion: v2\nflags: {migStrategy: 7, x: .inf}\nmig-configs: ~\n"
    elif second == "not-yaml":
        body += "---\nversion: [v1\n"
    elif second == "directive":
        body += "...\n%YAML 1.2\n---\nversion: v2\n"
    return body


def to_bytes(data: Any, style: Style) -> bytes:
    """The file as written in `style`'s encoding (what the oracle and `-f` read)."""
    text = to_yaml(data, style)
    how = style.encoding
    if how == "utf-16-le":
        return b"\xff\xfe" + text.encode("utf-16-le")
    if how == "utf-16-be":
        return b"\xfe\xff" + text.encode("utf-16-be")
    if how == "utf-8-bom":
        return b"\xef\xbb\xbf" + text.encode()
    if how == "two-boms":
        return ("\ufeff\ufeff" + text).encode()
    if how == "bom-later-line":  # a BOM before the file's second line
        first, newline, rest = text.partition("\n")
        return (first + newline + ("\ufeff" + rest if rest else "")).encode()
    if how == "bom-later-doc":
        return (text + "---\n\ufeffversion: v2\n").encode()
    return text.encode()


class _Writer:
    def __init__(self, style: Style) -> None:
        self.style = style
        self._booleans = 0
        self._numbers = 0
        self._counts: dict[str, int] = {}

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
        tag = self._next("tags")
        if tag:
            tagged = _tagged(value, tag)
            if tagged is not None:
                return tagged
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
        escape = self._next("escapes")
        if escape:
            return anchor + _escaped(text, escape)
        if _PLAIN.fullmatch(text) and text.lower() not in _RESERVED:
            return anchor + text
        return anchor + json.dumps(text)

    def _next(self, field: str) -> str:
        """The next choice of a per-scalar style field, cycled; "" when it has none."""
        choices = getattr(self.style, field)
        if not choices:
            return ""
        count = self._counts.get(field, 0)
        self._counts[field] = count + 1
        return str(choices[count % len(choices)])

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


def _escaped(text: str, how: str) -> str:
    """`text` double-quoted, one character written as an escape."""
    quoted = json.dumps(text, ensure_ascii=False)[1:-1]
    if how == "apostrophe":
        return f'"{quoted}\\\'"'  # text + "'" to Go's reader; PyYAML refuses it
    where = quoted.find("/")
    char = "/" if where >= 0 else (quoted[:1] if quoted[:1].isalnum() else "")
    if not char:
        return f'"{quoted}"'
    where = max(where, 0)
    code = ord(char)
    spelt = {"slash": "\\/", "hex": f"\\x{code:02x}", "u4": f"\\u{code:04X}"}.get(
        how, f"\\U{code:08x}"
    )
    if how == "slash" and char != "/":
        spelt = char
    return f'"{quoted[:where]}{spelt}{quoted[where + 1 :]}"'


def _tagged(value: Any, tag: str) -> str | None:
    """`value` written with an explicit tag; None where that tag does not fit it."""
    if isinstance(value, bool | float) or isinstance(value, dict | list):
        return None
    if value is None:
        return {"null": "!!null", "core": "!!null ~", "bare": "! ''"}.get(tag)
    text = str(value)
    plain = text if _PLAIN.fullmatch(text) and text.lower() not in _RESERVED else json.dumps(text)
    if isinstance(value, int):
        core = "!<tag:yaml.org,2002:int>" if tag == "verbatim" else "!!int"
        return {"bare": f"! {text}", "local": f"!n {text}"}.get(tag, f"{core} {text}")
    if tag == "binary":
        return "!!binary " + base64.b64encode(text.encode()).decode()
    verbatim = "!<tag:yaml.org,2002:str>"
    return {"bare": "! ", "local": "!s ", "verbatim": verbatim + " "}.get(tag, "!!str ") + plain


def _decoy(value: Any) -> Any:
    """A different value of the same kind, for a merged key the mapping then overrides."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 7
    if isinstance(value, str):
        return value + "-decoy"
    return "decoy"
