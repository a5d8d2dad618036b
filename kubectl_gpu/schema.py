"""Checking plain data against the JSON Schemas in `schemas/`, in the user's words.

Owns loading the shipped schemas (from a wheel, a zipapp or the source tree) and
translating jsonschema's errors into findings with a fix: unknown, misplaced and
wrongly-cased fields, quoted booleans, the schema's own upstream wording (x-message,
x-hint, x-code, x-moved). Must not parse YAML (that is `documents/`) or place findings
in the file (`documents.place_all` does, once every check has run).
`jsonschema` is imported inside functions so that `--help` stays fast.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import pathlib
from collections.abc import Iterator, Sequence
from typing import Any

from kubectl_gpu import conformance, findings
from kubectl_gpu.documents import Document, place_all
from kubectl_gpu.errors import shortened
from kubectl_gpu.findings import Finding, Path


def check_structure(data: Any, schema_name: str) -> list[Finding]:
    """Validate plain data against `schemas/<schema_name>.json`; the findings carry paths only.

    Data the schema's compiled check passes has no findings: jsonschema, imported only for
    the rest, is the one that finds and words errors (conformance.py says why)."""
    if _conforms(schema_name)(data):
        return []
    return _problems(data, _validator(schema_name))


def check_against(doc: Document, validator: Any) -> list[Finding]:
    """Validate a document with a jsonschema validator; the findings come back placed."""
    return place_all((doc, f) for f in _problems(doc.data, validator))


def _problems(data: Any, validator: Any) -> list[Finding]:
    """jsonschema's errors about `data`, translated into findings, each said once."""
    translated: list[Finding] = []
    seen: set[tuple[str, Path]] = set()
    errors = list(validator.iter_errors(data))
    # A value of the wrong type fails to decode; that is upstream's error, not "not one of".
    mistyped = {tuple(e.absolute_path) for e in errors if e.validator == "type"}
    for err in errors:
        if err.validator == "enum" and tuple(err.absolute_path) in mistyped:
            continue
        for finding in _translate(err):
            key = (finding.code + finding.message, finding.path)
            if key not in seen:
                seen.add(key)
                translated.append(finding)
    return translated


def schema_text(schema_name: str) -> str:
    """The JSON text of a shipped schema (works from a wheel, a zipapp and the source tree).
    A file beside this module is read directly: importlib.resources costs start-up 5 ms."""
    name = f"{schema_name}.json"
    try:
        return (pathlib.Path(__file__).parent / "schemas" / name).read_text("utf-8")
    except OSError:  # inside a zipapp
        from importlib import resources

        return (resources.files("kubectl_gpu") / "schemas" / name).read_text("utf-8")


@functools.cache
def _schema(schema_name: str) -> Any:
    return json.loads(schema_text(schema_name))


@functools.cache
def _conforms(schema_name: str) -> conformance.Check:
    return conformance.compile(_schema(schema_name)) or (lambda data: False)


@functools.cache
def _validator(schema_name: str) -> Any:
    import jsonschema

    return jsonschema.Draft202012Validator(_schema(schema_name))


_TYPE_WORDS = {
    "boolean": "a boolean (true or false)",
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "array": "a list",
    "object": "a mapping",
    "null": "null",
}


def _translate(err: Any) -> Iterator[Finding]:
    path: Path = tuple(err.absolute_path)
    if err.validator in ("oneOf", "anyOf") and err.context:
        yield from _translate_union(err, path)
        return
    on_key = "propertyNames" in err.relative_schema_path
    if on_key:  # jsonschema reports a bad key at its mapping, with the key as the instance
        path = (*path, err.instance)
    handler = _HANDLERS.get(err.validator, _generic)
    for finding in handler(err, path):
        yield _customised(err, dataclasses.replace(finding, at_key=finding.at_key or on_key))


def _customised(err: Any, finding: Finding) -> Finding:
    """Apply the schema's own wording (x-message, x-hint, x-code) for the failed keyword."""
    extra = err.schema if isinstance(err.schema, dict) else {}
    fields = {"value": _plain(err.instance), "field": _field(finding.path)}
    keyword = err.validator
    codes = extra.get("x-code", {})
    return dataclasses.replace(
        finding,
        message=_template(extra.get("x-message", {}), keyword, finding.message, fields),
        hint=_template(extra.get("x-hint", {}), keyword, finding.hint, fields),
        code=codes.get(keyword, finding.code) if isinstance(codes, dict) else finding.code,
    )


def _template(table: Any, keyword: str, default: str, fields: dict[str, str]) -> str:
    text = (
        table
        if isinstance(table, str)
        else (table.get(keyword) if isinstance(table, dict) else None)
    )
    if not isinstance(text, str):
        return default
    # Plain replacement, not str.format: messages may quote YAML such as {devices: all}.
    for name, value in fields.items():
        text = text.replace("{" + name + "}", value)
    return text


def _on_key(path: Path, code: str, message: str, hint: str) -> Finding:
    return dataclasses.replace(findings.error(path, code, message, hint), at_key=True)


def _additional(err: Any, path: Path) -> Iterator[Finding]:
    import re

    known = list(err.schema.get("properties", {}))
    patterns = [re.compile(p) for p in err.schema.get("patternProperties", {})]
    moved = err.schema.get("x-moved", {})
    parent = str(path[-1]) if path else "the top level"
    for key in err.instance:
        if key in known or any(p.search(key) for p in patterns):
            continue
        where = (*path, key)
        same_but_case = [k for k in known if k.lower() == key.lower()]
        if key in moved:
            yield _on_key(
                where,
                "schema.misplaced-field",
                f"'{key}' does not belong under '{parent}'",
                f"move it to {moved[key]}",
            )
        elif same_but_case:
            yield _on_key(
                where,
                "schema.wrong-case",
                f"unknown field '{key}': upstream reads keys here case-sensitively and "
                f"ignores '{key}'",
                f"write '{same_but_case[0]}'",
            )
        else:
            yield _on_key(
                where, "schema.unknown-field", f"unknown field '{key}'", _did_you_mean(key, known)
            )


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    import difflib

    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if close:
        return f"did you mean '{close[0]}'?"
    return "known fields: " + ", ".join(choices) if choices else "remove it"


def _required(err: Any, path: Path) -> Iterator[Finding]:
    for name in err.validator_value:
        if isinstance(err.instance, dict) and name not in err.instance:
            yield findings.error(
                (*path, name),
                "schema.missing-field",
                f"missing required field '{name}'",
                f"add '{name}'",
            )


def _type(err: Any, path: Path) -> Iterator[Finding]:
    wanted = err.validator_value
    expected = wanted if isinstance(wanted, list) else [wanted]
    words = " or ".join(_TYPE_WORDS.get(str(t), str(t)) for t in expected)
    yield findings.error(
        path,
        "schema.wrong-type",
        f"expected {words}, found {_describe(err.instance)}",
        _type_hint(err.instance, expected),
    )


def _type_hint(value: Any, expected: list[str]) -> str:
    if isinstance(value, str):
        text = value.strip().lower()
        if "boolean" in expected and text in ("true", "false"):
            return f"remove the quotes: write {text}"
        digits = text.lstrip("-")
        if "integer" in expected and digits.isascii() and digits.isdigit() and len(text) < 20:
            return f"remove the quotes: write {text}"
    if isinstance(value, float) and "integer" in expected:
        return "use a whole number"
    return ""


def _enum(err: Any, path: Path) -> Iterator[Finding]:
    allowed = [str(v) for v in err.validator_value]
    value = err.instance
    same = [a for a in allowed if isinstance(value, str) and a.lower() == value.lower()]
    hint = (
        f"write '{same[0]}' (values are case-sensitive)"
        if same
        else "use one of: " + ", ".join(allowed)
    )
    yield findings.error(
        path, "schema.bad-value", f"'{_plain(value)}' is not one of: {', '.join(allowed)}", hint
    )


def _const(err: Any, path: Path) -> Iterator[Finding]:
    want = _plain(err.validator_value)
    yield findings.error(
        path,
        "schema.bad-value",
        f"expected '{want}', found '{_plain(err.instance)}'",
        f"write '{want}'",
    )


def _generic(err: Any, path: Path) -> Iterator[Finding]:
    yield findings.error(path, f"schema.{_kebab(err.validator)}", err.message)


_BOUNDS = {
    "minimum": "must be at least {v}",
    "maximum": "must be at most {v}",
    "exclusiveMinimum": "must be greater than {v}",
    "exclusiveMaximum": "must be less than {v}",
    "minItems": "must have at least {v} item(s)",
    "maxItems": "must have at most {v} item(s)",
    "minProperties": "must have at least {v} entr(y/ies)",
    "minLength": "must be at least {v} character(s) long",
    "maxLength": "must be at most {v} characters long",
    "pattern": "must match the pattern {v}",
    "uniqueItems": "must not repeat items",
}


def _bounded(err: Any, path: Path) -> Iterator[Finding]:
    rule = _BOUNDS[err.validator].format(v=err.validator_value)
    yield findings.error(path, "schema.bad-value", f"'{_plain(err.instance)}' {rule}")


_HANDLERS: dict[str, Any] = {
    "additionalProperties": _additional,
    "required": _required,
    "type": _type,
    "enum": _enum,
    "const": _const,
    **{k: _bounded for k in _BOUNDS},
}


def _translate_union(err: Any, path: Path) -> Iterator[Finding]:
    deeper = [e for e in err.context if len(e.absolute_path) > len(path)]
    if deeper:
        # The value has the right shape for one branch but fails inside it: report that.
        yield from _translate(max(deeper, key=lambda e: len(e.absolute_path)))
        return
    choices = " or ".join(b for b in map(_describe_schema, err.validator_value) if b)
    message = f"expected {choices}, found {_describe(err.instance)}"
    yield _customised(err, findings.error(path, "schema.wrong-type", message))


def _describe_schema(schema: Any) -> str:
    if not isinstance(schema, dict):
        return ""
    if "const" in schema:
        return f"'{_plain(schema['const'])}'"
    if "enum" in schema:
        return "one of " + ", ".join(f"'{v}'" for v in schema["enum"])
    kind = schema.get("type")
    if kind == "array" and isinstance(schema.get("items"), dict):
        inner = schema["items"].get("type")
        if isinstance(inner, str):
            return f"a list of {inner}s"
    return _TYPE_WORDS.get(kind, "") if isinstance(kind, str) else ""


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string '{shortened(value)}'"
    if isinstance(value, (int, float)):
        return f"the number {shortened(value)}"
    if isinstance(value, list):
        return "a list"
    return "a mapping"


def _plain(value: Any) -> str:
    """A value quoted in a message, cut short: a file may hold a megabyte in one value."""
    if isinstance(value, str):
        return shortened(value)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return shortened(value)
    if isinstance(value, (list, dict)) and len(value) > 8:
        return "a list" if isinstance(value, list) else "a mapping"
    try:
        return shortened(json.dumps(value, sort_keys=True))
    except (TypeError, ValueError):
        return shortened(value)


def _field(path: Path) -> str:
    return str(path[-1]) if path else ""


def _kebab(name: str) -> str:
    return "".join("-" + c.lower() if c.isupper() else c for c in name)
