"""jsonschema's errors become findings in the user's words, with a fix."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from kubectl_gpu import documents, schema

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["version"],
    "properties": {
        "version": {
            "const": "v1",
            "x-message": {"const": "unknown version: {value}"},
            "x-code": {"const": "test.unknown-version"},
        },
        "flags": {
            "type": "object",
            "additionalProperties": False,
            "x-moved": {"renameByDefault": "sharing.timeSlicing.renameByDefault"},
            "properties": {
                "migStrategy": {"enum": ["none", "single", "mixed"]},
                "failOnInitError": {"type": "boolean"},
                "count": {"type": "integer", "minimum": 1},
            },
        },
        "devices": {"anyOf": [{"const": "all"}, {"type": "array", "items": {"type": "integer"}}]},
    },
}


def check(text: str) -> list[tuple[str, int | None, str, str, str]]:
    docs, found = documents.load_documents(text, "f.yaml")
    assert found == []
    validator = jsonschema.Draft202012Validator(SCHEMA)
    return [
        (f.code, f.line, f.pointer, f.message, f.hint)
        for f in schema.check_against(docs[0], validator)
    ]


def test_unknown_field_points_at_the_key_and_suggests_the_closest_name() -> None:
    assert check("version: v1\nflags:\n  migStrategyy: none\n") == [
        (
            "schema.unknown-field",
            3,
            "/flags/migStrategyy",
            "unknown field 'migStrategyy'",
            "did you mean 'migStrategy'?",
        )
    ]


def test_wrong_case_is_named_as_such() -> None:
    [(code, line, _, message, hint)] = check("version: v1\nflags:\n  MigStrategy: none\n")
    assert (code, line, hint) == ("schema.wrong-case", 3, "write 'migStrategy'")
    assert "case-sensitive" in message


def test_misplaced_field_says_where_it_belongs() -> None:
    assert check("version: v1\nflags:\n  renameByDefault: true\n") == [
        (
            "schema.misplaced-field",
            3,
            "/flags/renameByDefault",
            "'renameByDefault' does not belong under 'flags'",
            "move it to sharing.timeSlicing.renameByDefault",
        )
    ]


def test_quoted_boolean_gets_remove_the_quotes() -> None:
    assert check('version: v1\nflags:\n  failOnInitError: "true"\n') == [
        (
            "schema.wrong-type",
            3,
            "/flags/failOnInitError",
            "expected a boolean (true or false), found the string 'true'",
            "remove the quotes: write true",
        )
    ]


def test_enum_value_in_the_wrong_case_gets_the_right_spelling() -> None:
    [(code, _, _, message, hint)] = check("version: v1\nflags:\n  migStrategy: Mixed\n")
    assert code == "schema.bad-value"
    assert message == "'Mixed' is not one of: none, single, mixed"
    assert hint == "write 'mixed' (values are case-sensitive)"


def test_schema_can_carry_the_upstream_wording() -> None:
    assert check("version: v2\n") == [
        ("test.unknown-version", 1, "/version", "unknown version: v2", "write 'v1'")
    ]


def test_missing_required_field_is_named() -> None:
    assert check("flags: {}\n") == [
        ("schema.missing-field", 1, "/version", "missing required field 'version'", "add 'version'")
    ]


def test_bounds_say_the_limit() -> None:
    [(code, line, _, message, _)] = check("version: v1\nflags:\n  count: 0\n")
    assert (code, line, message) == ("schema.bad-value", 3, "'0' must be at least 1")


def test_union_mismatch_lists_the_accepted_forms() -> None:
    assert check("version: v1\ndevices: some\n") == [
        (
            "schema.wrong-type",
            2,
            "/devices",
            "expected 'all' or a list of integers, found the string 'some'",
            "",
        )
    ]


def test_union_error_inside_the_matching_branch_points_at_the_item() -> None:
    [(code, line, pointer, _, _)] = check("version: v1\ndevices:\n- 0\n- one\n")
    assert (code, line, pointer) == ("schema.wrong-type", 4, "/devices/1")


@pytest.mark.parametrize("text", ["[]\n", "42\n", "version: v1\nflags: [1]\n"])
def test_wrong_shapes_never_raise(text: str) -> None:
    assert all(code.startswith("schema.") for code, *_ in check(text))


def test_braces_in_a_schema_message_are_kept_literally() -> None:
    braced: dict[str, Any] = {
        "type": "object",
        "properties": {"devices": {"type": "string", "x-hint": {"type": "write {devices: all}"}}},
    }
    docs, _ = documents.load_documents("devices: 3\n", "f.yaml")
    [finding] = schema.check_against(docs[0], jsonschema.Draft202012Validator(braced))
    assert finding.hint == "write {devices: all}"
