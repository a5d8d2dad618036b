"""Whether data conforms to a JSON Schema, answered without importing jsonschema.

Owns compiling a schema once into a tree of small checks, for the Draft 2020-12 keywords the
shipped schemas use (type, enum, const, properties, required, additionalProperties,
propertyNames, minProperties, items, minItems, maxItems, minLength, maxLength, pattern,
minimum, maximum, allOf, anyOf, oneOf, not, if/then/else, and `$ref` to `#/$defs/…`), with
jsonschema's own semantics (1.0 is an integer, True is not 1, `pattern` searches). Importing
jsonschema costs about half of `validate`'s 250 ms budget, and most files a person validates
conform: `schema.check_structure` asks here first, and only a document that does not conform
(or a schema with any other keyword: `compile` returns None) goes to jsonschema, which finds
and words every error. So a yes here must never meet a no from jsonschema; tests compare the
two on every test file and on generated documents. Must not word errors (schema.py does).
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], bool]

# Keywords that never fail a document (annotations), besides every `x-…` of our own.
DRAFT = "https://json-schema.org/draft/2020-12/schema"
_ANNOTATIONS = frozenset(
    {"$schema", "$comment", "$defs", "title", "description", "default", "examples",
     "deprecated", "readOnly", "writeOnly", "format", "contentMediaType", "contentEncoding"}
)  # fmt: skip


class Unsupported(Exception):
    """The schema uses a keyword this module does not evaluate: jsonschema must."""


class _Unsure(Exception):
    """A value this module does not compare as jsonschema would (a list or mapping in
    `enum`/`const`): the document goes to jsonschema."""


def compile(schema: Any) -> Check | None:  # noqa: A001 - the verb of the domain
    """A check of `schema` (the root, for `$ref`s), or None when it uses another keyword."""
    try:
        if not isinstance(schema, dict) or schema.get("$schema", DRAFT) != DRAFT:
            raise Unsupported("another draft")
        check = _Compiler(schema).build(schema)
    except Unsupported:
        return None

    def conforms(data: Any) -> bool:
        try:
            return check(data)
        except (_Unsure, RecursionError):
            return False

    return conforms


def _is_integer(x: Any) -> bool:
    return not isinstance(x, bool) and (
        isinstance(x, int) or (isinstance(x, float) and x.is_integer())
    )


def _is_number(x: Any) -> bool:
    return not isinstance(x, bool) and isinstance(x, numbers.Number)


_TYPES: dict[str, Check] = {
    "null": lambda x: x is None,
    "boolean": lambda x: isinstance(x, bool),
    "integer": _is_integer,
    "number": _is_number,
    "string": lambda x: isinstance(x, str),
    "array": lambda x: isinstance(x, list),
    "object": lambda x: isinstance(x, dict),
}


def _equal(x: Any, want: Any) -> bool:
    """jsonschema's `equal` for scalars: True is not 1, 1 is 1.0."""
    if isinstance(x, (list, dict)) or isinstance(want, (list, dict)):
        raise _Unsure()
    if isinstance(x, bool) or isinstance(want, bool):
        return isinstance(x, bool) and isinstance(want, bool) and x == want
    return bool(x == want)


class _Compiler:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.refs: dict[str, Check] = {}

    def build(self, schema: Any) -> Check:
        if schema is True:
            return lambda x: True
        if schema is False:
            return lambda x: False
        if not isinstance(schema, dict):
            raise Unsupported(f"a schema that is a {type(schema).__name__}")
        if "$id" in schema and schema is not self.root:
            raise Unsupported("$id below the root: another base for $ref")
        found = [
            self._keyword(key, value, schema)
            for key, value in schema.items()
            if key not in _ANNOTATIONS and not key.startswith("x-")
        ]
        checks = [c for c in found if c is not None]
        if len(checks) == 1:
            return checks[0]
        return lambda x: all(check(x) for check in checks)

    def _keyword(self, key: str, value: Any, schema: dict[str, Any]) -> Check | None:
        simple = _SIMPLE.get(key)
        if simple is not None:
            return simple(value)
        method = _WITH_SUBSCHEMAS.get(key)
        if method is None:
            raise Unsupported(key)
        return method(self, value, schema)

    # --- keywords with subschemas -------------------------------------------------------------

    def _properties(self, value: dict[str, Any], schema: dict[str, Any]) -> Check:
        checks = {name: self.build(sub) for name, sub in value.items()}

        def properties(x: Any) -> bool:
            if not isinstance(x, dict):
                return True
            return all(check(x[name]) for name, check in checks.items() if name in x)

        return properties

    def _additionalProperties(self, value: Any, schema: dict[str, Any]) -> Check:
        if "patternProperties" in schema:
            raise Unsupported("patternProperties")
        known = frozenset(schema.get("properties") or ())
        check = self.build(value)

        def additional(x: Any) -> bool:
            if not isinstance(x, dict):
                return True
            return all(check(v) for k, v in x.items() if k not in known)

        return additional

    def _propertyNames(self, value: Any, schema: dict[str, Any]) -> Check:
        check = self.build(value)
        return lambda x: not isinstance(x, dict) or all(check(k) for k in x)

    def _items(self, value: Any, schema: dict[str, Any]) -> Check:
        if "prefixItems" in schema:
            raise Unsupported("prefixItems")
        check = self.build(value)
        return lambda x: not isinstance(x, list) or all(check(item) for item in x)

    def _allOf(self, value: list[Any], schema: dict[str, Any]) -> Check:
        checks = [self.build(sub) for sub in value]
        return lambda x: all(check(x) for check in checks)

    def _anyOf(self, value: list[Any], schema: dict[str, Any]) -> Check:
        checks = [self.build(sub) for sub in value]
        return lambda x: any(check(x) for check in checks)

    def _oneOf(self, value: list[Any], schema: dict[str, Any]) -> Check:
        checks = [self.build(sub) for sub in value]
        return lambda x: sum(1 for check in checks if check(x)) == 1

    def _not(self, value: Any, schema: dict[str, Any]) -> Check:
        check = self.build(value)
        return lambda x: not check(x)

    def _if(self, value: Any, schema: dict[str, Any]) -> Check:
        condition = self.build(value)
        then = self.build(schema.get("then", True))
        otherwise = self.build(schema.get("else", True))
        return lambda x: then(x) if condition(x) else otherwise(x)

    def _id(self, value: Any, schema: dict[str, Any]) -> None:
        return None  # the root's (build refuses one below it)

    def _then(self, value: Any, schema: dict[str, Any]) -> None:
        return None  # with `if`

    def _else(self, value: Any, schema: dict[str, Any]) -> None:
        return None  # with `if`

    def _ref(self, value: Any, schema: dict[str, Any]) -> Check:
        if not isinstance(value, str) or not value.startswith("#/$defs/"):
            raise Unsupported(f"$ref {value!r}")
        name = value[len("#/$defs/") :]
        if name not in self.refs:
            target = ((self.root.get("$defs") or {}) if isinstance(self.root, dict) else {}).get(
                name
            )
            if target is None or "/" in name or "~" in name:
                raise Unsupported(f"$ref {value!r}")
            self.refs[name] = lambda x: False  # a recursive reference, until built
            built = self.build(target)
            self.refs[name] = built
        refs = self.refs
        return lambda x: refs[name](x)


_WITH_SUBSCHEMAS: dict[str, Callable[[_Compiler, Any, dict[str, Any]], Check | None]] = {
    "properties": _Compiler._properties,
    "additionalProperties": _Compiler._additionalProperties,
    "propertyNames": _Compiler._propertyNames,
    "items": _Compiler._items,
    "allOf": _Compiler._allOf,
    "anyOf": _Compiler._anyOf,
    "oneOf": _Compiler._oneOf,
    "not": _Compiler._not,
    "if": _Compiler._if,
    "then": _Compiler._then,
    "else": _Compiler._else,
    "$ref": _Compiler._ref,
    "$id": _Compiler._id,
}


def _type(value: Any) -> Check:
    names = value if isinstance(value, list) else [value]
    if not all(isinstance(n, str) and n in _TYPES for n in names):
        raise Unsupported(f"type {value!r}")
    checks = [_TYPES[n] for n in names]
    return lambda x: any(check(x) for check in checks)


def _enum(value: Any) -> Check:
    if not isinstance(value, list):
        raise Unsupported("enum that is not a list")
    return lambda x: any(_equal(x, each) for each in value)


def _const(value: Any) -> Check:
    return lambda x: _equal(x, value)


def _required(value: Any) -> Check:
    names = list(value)
    return lambda x: not isinstance(x, dict) or all(name in x for name in names)


def _pattern(value: Any) -> Check:
    try:
        found = re.compile(value)
    except (TypeError, re.error) as e:
        raise Unsupported(f"pattern {value!r}") from e
    return lambda x: not isinstance(x, str) or found.search(x) is not None


def _bound(
    applies: Check, size: Callable[[Any], Any], fits: Callable[[Any, Any], bool]
) -> Callable[[Any], Check]:
    def make(limit: Any) -> Check:
        if not _is_number(limit):
            raise Unsupported(f"a bound of {limit!r}")
        return lambda x: not applies(x) or fits(size(x), limit)

    return make


def _itself(x: Any) -> Any:
    return x


_SIMPLE: dict[str, Callable[[Any], Check]] = {
    "type": _type,
    "enum": _enum,
    "const": _const,
    "required": _required,
    "pattern": _pattern,
    "minimum": _bound(_is_number, _itself, lambda v, m: v >= m),
    "maximum": _bound(_is_number, _itself, lambda v, m: v <= m),
    "exclusiveMinimum": _bound(_is_number, _itself, lambda v, m: v > m),
    "exclusiveMaximum": _bound(_is_number, _itself, lambda v, m: v < m),
    "minLength": _bound(_TYPES["string"], len, lambda v, m: v >= m),
    "maxLength": _bound(_TYPES["string"], len, lambda v, m: v <= m),
    "minItems": _bound(_TYPES["array"], len, lambda v, m: v >= m),
    "maxItems": _bound(_TYPES["array"], len, lambda v, m: v <= m),
    "minProperties": _bound(_TYPES["object"], len, lambda v, m: v >= m),
    "maxProperties": _bound(_TYPES["object"], len, lambda v, m: v <= m),
}
