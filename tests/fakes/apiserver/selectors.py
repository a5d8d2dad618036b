"""Label and field selectors, parsed and matched as the real API server does.

Owns the selector grammars (`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`,
`a>1`, `a<1`; fields `path=value`, `path!=value`) and matching objects against them. Parse
errors raise a 400 `ApiError`. Must not know about storage or HTTP.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.fakes.apiserver import errors
from tests.fakes.apiserver.resources import ResourceType
from tests.fakes.apiserver.validation import label_value_problems, qualified_name_problems

Obj = dict[str, Any]
_TOKEN = re.compile(r"\s*(==|!=|=|!|\(|\)|,|<|>|[^\s,()=!<>]+)")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: str  # exists, !exists, =, !=, in, notin, gt, lt
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key, "")
        checks: dict[str, Callable[[], bool]] = {
            "exists": lambda: present,
            "!exists": lambda: not present,
            "=": lambda: present and value == self.values[0],
            "in": lambda: present and value in self.values,
            "!=": lambda: not present or value != self.values[0],
            "notin": lambda: not present or value not in self.values,
            "gt": lambda: present and _number(value) > int(self.values[0]),
            "lt": lambda: present and _number(value) < int(self.values[0]),
        }
        return checks[self.op]()


def _number(text: str) -> float:
    try:
        return int(text)
    except ValueError:
        return float("nan")


class _Tokens:
    def __init__(self, text: str) -> None:
        self.items = _TOKEN.findall(text)
        self.text = text
        self.pos = 0

    def peek(self) -> str:
        return self.items[self.pos] if self.pos < len(self.items) else ""

    def take(self) -> str:
        token = self.peek()
        self.pos += 1
        return token

    def fail(self, why: str) -> errors.ApiError:
        return errors.bad_request(f"unable to parse requirement: {why} in {self.text!r}")


def parse_labels(text: str) -> tuple[Requirement, ...]:
    """Parse a `labelSelector` query value; an empty one selects everything."""
    tokens = _Tokens(text)
    found: list[Requirement] = []
    while tokens.peek():
        found.append(_requirement(tokens))
        if tokens.peek() not in ("", ","):
            raise tokens.fail(f"unexpected {tokens.peek()!r}")
        tokens.take()
    return tuple(found)


def _requirement(tokens: _Tokens) -> Requirement:
    if tokens.peek() == "!":
        tokens.take()
        return Requirement(_key(tokens), "!exists")
    key = _key(tokens)
    op = tokens.peek()
    if op in ("", ","):
        return Requirement(key, "exists")
    tokens.take()
    if op in ("=", "==", "!="):
        value = tokens.peek() if tokens.peek() not in (",", "") else ""
        tokens.pos += 1 if value else 0
        _check_value(tokens, value)
        return Requirement(key, "!=" if op == "!=" else "=", (value,))
    if op in ("in", "notin"):
        return Requirement(key, op, _value_set(tokens))
    if op in ("<", ">"):
        bound = tokens.take()
        if not re.fullmatch(r"-?\d+", bound):
            raise tokens.fail(f"for 'gt', 'lt' operators, the value must be an integer: {bound}")
        return Requirement(key, "gt" if op == ">" else "lt", (bound,))
    raise tokens.fail(f"unknown operator {op!r}")


def _key(tokens: _Tokens) -> str:
    key = tokens.take()
    problems = qualified_name_problems(key) if key else ["key is empty"]
    if problems:
        raise tokens.fail(f"invalid label key {key!r}: {problems[0]}")
    return key


def _check_value(tokens: _Tokens, value: str) -> None:
    problems = label_value_problems(value)
    if problems:
        raise tokens.fail(f"invalid label value {value!r}: {problems[0]}")


def _value_set(tokens: _Tokens) -> tuple[str, ...]:
    if tokens.take() != "(":
        raise tokens.fail("found no '(' after a set operator")
    values: list[str] = []
    while tokens.peek() not in (")", ""):
        token = tokens.take()
        if token != ",":
            _check_value(tokens, token)
            values.append(token)
    if tokens.take() != ")":
        raise tokens.fail("found no closing ')'")
    return tuple(values)


def labels_match(requirements: tuple[Requirement, ...], obj: Obj) -> bool:
    if not requirements:
        return True
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(r.matches(labels) for r in requirements)


@dataclass(frozen=True, slots=True)
class FieldTerm:
    path: str
    value: str
    negated: bool


def parse_fields(text: str, rtype: ResourceType) -> tuple[FieldTerm, ...]:
    """Parse a `fieldSelector`; only the field labels the real server supports are accepted."""
    terms: list[FieldTerm] = []
    for part in _split_unescaped(text, ","):
        if not part:
            continue
        match = re.fullmatch(r"([^=!]+?)\s*(==|!=|=)\s*(.*)", part, re.S)
        if not match:
            raise errors.bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        path, op, value = match.group(1).strip(), match.group(2), _unescape(match.group(3))
        if not rtype.supports_field(path):
            raise errors.bad_request(f"field label not supported: {path}")
        terms.append(FieldTerm(path, value, op == "!="))
    return tuple(terms)


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, current, escaped = [], "", False
    for char in text:
        if escaped:
            current, escaped = current + "\\" + char, False
        elif char == "\\":
            escaped = True
        elif char == sep:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def field_value(obj: Obj, path: str) -> str:
    """The string a field selector compares: missing fields read as "", booleans as true/false."""
    if path == "source":  # events select on their reporting component under this short name
        path = "source.component"
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


def fields_match(terms: tuple[FieldTerm, ...], obj: Obj) -> bool:
    return all((field_value(obj, t.path) == t.value) != t.negated for t in terms)
