"""`-o jsonpath=TEMPLATE`: kubectl's JSONPath templates over a command's `-o json` document.

Owns parsing and evaluating the part of kubectl's template language that scripts use: text
with `{…}` actions holding a path (`.a.b`, `['key.with.dots']`, `[0]`, `[-1]`, `[*]`, `[1:3]`,
`..name` to search at any depth, `@` or `.` for the current object), quoted literals
(`{"\\n"}`, `{'\\t'}`) and `{range PATH}…{end}` loops. As in kubectl, the values of one action
are joined by a space, strings print bare and other values as compact JSON, and a missing key
is an error naming it. Filters (`[?(…)]`) are refused with a hint to use `-o json` and jq.
Pure: standard library only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from kubectl_gpu.errors import UsageError

_STEP = re.compile(
    r"""\.\.(?P<deep>[\w-]+)            # ..name: anywhere below
      | \.(?P<field>[\w-]+)             # .name
      | \[(?P<quote>['"])(?P<key>.*?)(?P=quote)\]   # ['a.b']
      | \[(?P<index>-?\d+)\]            # [0]
      | \[(?P<slice>-?\d*:-?\d*)\]      # [1:3]
      | \[\*\]|\.\*                     # [*] or .*
    """,
    re.VERBOSE,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'"}


class _Missing(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def render(template: str, document: Any) -> str:
    """The template applied to `document`; UsageError for a template it cannot read."""
    actions = _split(template)
    try:
        return "".join(_run(actions, document))
    except _Missing as e:
        raise UsageError(
            f"error executing jsonpath {template!r}: {e.name} is not found",
            hint="see the field names with -o json",
        ) from e


def _split(template: str) -> list[tuple[str, str]]:
    """("text", …) and ("action", …) pieces; braces inside quotes do not count."""
    pieces, at = [], 0
    for match in re.finditer(r"\{((?:'[^']*'|\"(?:[^\"\\]|\\.)*\"|[^{}])*)\}", template):
        if match.start() > at:
            pieces.append(("text", template[at : match.start()]))
        pieces.append(("action", match.group(1).strip()))
        at = match.end()
    if "{" in template[at:] or "}" in template[at:]:
        raise UsageError(f"unclosed action in jsonpath template {template!r}")
    if at < len(template):
        pieces.append(("text", template[at:]))
    return pieces


def _run(pieces: Sequence[tuple[str, str]], current: Any) -> Iterator[str]:
    index = 0
    while index < len(pieces):
        kind, text = pieces[index]
        if kind == "text":
            yield text
        elif text.startswith("range "):
            end = _matching_end(pieces, index)
            for item in _values(text[len("range ") :].strip(), current):
                yield from _run(pieces[index + 1 : end], item)
            index = end
        elif text == "end":
            raise UsageError("jsonpath template has {end} without {range …}")
        else:
            yield " ".join(_show(v) for v in _action(text, current))
        index += 1


def _matching_end(pieces: Sequence[tuple[str, str]], start: int) -> int:
    depth = 0
    for index in range(start, len(pieces)):
        kind, text = pieces[index]
        if kind == "action" and text.startswith("range "):
            depth += 1
        elif kind == "action" and text == "end":
            depth -= 1
            if depth == 0:
                return index
    raise UsageError("jsonpath template has {range …} without {end}")


def _action(text: str, current: Any) -> list[Any]:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return [re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), text[1:-1])]
    return list(_values(text, current))


def _values(path: str, current: Any) -> Iterator[Any]:
    path = path.removeprefix("$").removeprefix("@")
    if path in ("", "."):
        yield current
        return
    found = [current]
    at = 0
    while at < len(path):
        if path.startswith("[?", at):
            raise UsageError("jsonpath filters [?(…)] are not supported", hint="use -o json | jq")
        match = _STEP.match(path, at)
        if match is None:
            raise UsageError(f"cannot read jsonpath {path!r} at {path[at:]!r}")
        found = [v for item in found for v in _step(match, item)]
        at = match.end()
    yield from found


def _step(match: re.Match[str], item: Any) -> list[Any]:
    name = match.group("field") or match.group("key")
    if name is not None and match.group("deep") is None:
        if not isinstance(item, dict) or name not in item:
            raise _Missing(name)
        return [item[name]]
    if match.group("deep") is not None:
        return list(_deep(item, match.group("deep")))
    if not isinstance(item, (list, dict)):
        return []
    items = list(item.values()) if isinstance(item, dict) else item
    if match.group("index") is not None:
        position = int(match.group("index"))
        if not -len(items) <= position < len(items):
            raise _Missing(f"[{position}]")
        return [items[position]]
    if match.group("slice") is not None:
        low, _, high = match.group("slice").partition(":")
        return items[slice(int(low) if low else None, int(high) if high else None)]
    return items  # [*]


def _deep(item: Any, name: str) -> Iterator[Any]:
    if isinstance(item, dict):
        if name in item:
            yield item[name]
        for value in item.values():
            yield from _deep(value, name)
    elif isinstance(item, list):
        for value in item:
            yield from _deep(value, name)


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))
