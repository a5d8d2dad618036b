"""YAML-level problems are reported with the line and column a user can jump to."""

from __future__ import annotations

import pytest

from kubectl_gpu import documents
from kubectl_gpu.findings import Severity


def problems(text: str) -> list[tuple[str, int | None, int | None]]:
    _, found = documents.load_documents(text, "f.yaml")
    return [(f.code, f.line, f.column) for f in found]


def test_syntax_error_names_the_position_of_the_problem() -> None:
    _, found = documents.load_documents("version: v1\nsharing:\n  timeSlicing: [a, b\n", "f.yaml")
    assert [(f.code, f.line, f.file) for f in found] == [("yaml.syntax", 4, "f.yaml")]
    assert "flow sequence" in found[0].message


def test_duplicate_key_is_an_error_that_names_both_lines() -> None:
    text = "version: v1\nflags:\n  migStrategy: none\n  migStrategy: mixed\n"
    _, found = documents.load_documents(text, "f.yaml")
    assert [(f.code, f.line, f.column, f.pointer) for f in found] == [
        ("yaml.duplicate-key", 4, 3, "/flags/migStrategy")
    ]
    assert "first defined on line 3" in found[0].message
    assert found[0].severity is Severity.ERROR


@pytest.mark.parametrize(
    "word, meaning", [("yes", "true"), ("on", "true"), ("Off", "false"), ("no", "false")]
)
def test_yaml_1_1_booleans_warn_and_say_what_they_mean(word: str, meaning: str) -> None:
    _, found = documents.load_documents(f"flags:\n  failOnInitError: {word}\n", "f.yaml")
    assert [(f.code, f.line, f.column) for f in found] == [("yaml.ambiguous-boolean", 2, 20)]
    assert found[0].severity is Severity.WARNING
    assert found[0].hint == f"write {meaning}"


def test_true_and_false_are_not_ambiguous() -> None:
    assert problems("a: true\nb: false\nc: True\n") == []


def test_alias_bomb_is_refused_quickly_instead_of_expanded() -> None:
    levels = ["a: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        levels.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    assert problems("\n".join(levels) + "\n") == [("yaml.too-complex", 1, 1)]


def test_recursive_alias_is_refused() -> None:
    assert [c for c, _, _ in problems("a: &a [*a]\n")] == ["yaml.too-complex"]


def test_empty_text_is_one_empty_document() -> None:
    docs, found = documents.load_documents("", "f.yaml")
    assert found == [] and [d.data for d in docs] == [None]


def test_every_document_of_a_stream_is_read() -> None:
    docs, found = documents.load_documents("a: 1\n---\nb: 2\n", "f.yaml")
    assert found == [] and [d.data for d in docs] == [{"a": 1}, {"b": 2}]


def test_merge_keys_are_applied_like_go_yaml() -> None:
    docs, _ = documents.load_documents("base: &b {x: 1}\nother:\n  <<: *b\n  z: 2\n", "f.yaml")
    assert docs[0].data["other"] == {"x": 1, "z": 2}


def test_keys_are_named_as_go_names_them_and_a_null_key_is_refused() -> None:
    docs, found = documents.load_documents("1: a\n0x10: b\non: c\n'on': d\nnull: e\n", "f.yaml")
    assert docs[0].data == {"1": "a", "16": "b", "true": "c", "on": "d"}
    assert [(f.code, f.line) for f in found] == [
        ("yaml.key-not-string", 2),
        ("yaml.key-not-string", 3),
        ("yaml.null-key", 5),
    ]


def test_a_value_in_a_block_scalar_is_located_in_the_outer_file() -> None:
    text = "kind: ConfigMap\ndata:\n  any: |-\n    version: v1\n    flags:\n      migStrategy: x\n"
    docs, _ = documents.load_documents(text, "cm.yaml")
    inner, found = documents.load_nested(docs[0], ("data", "any"), docs[0].data["data"]["any"])
    assert found == []
    assert inner[0].locate(("flags", "migStrategy")) == (6, 20)
    assert inner[0].locate(("flags", "migStrategy"), at_key=True) == (6, 7)


def test_a_syntax_error_inside_a_configmap_value_points_into_the_file() -> None:
    text = "kind: ConfigMap\ndata:\n  any: |\n    version: v1\n    flags: [a\n"
    docs, _ = documents.load_documents(text, "cm.yaml")
    _, found = documents.load_nested(docs[0], ("data", "any"), docs[0].data["data"]["any"])
    assert [(f.code, f.line) for f in found] == [("yaml.syntax", 6)]


def test_a_quoted_configmap_value_maps_to_the_key_line_only() -> None:
    text = 'kind: ConfigMap\ndata:\n  any: "version: v1\\nflags: {a: 1, a: 2}"\n'
    docs, _ = documents.load_documents(text, "cm.yaml")
    _, found = documents.load_nested(docs[0], ("data", "any"), docs[0].data["data"]["any"])
    assert [(f.code, f.line, f.column) for f in found] == [("yaml.duplicate-key", 3, None)]


@pytest.mark.parametrize("text", ["[" * 200_000 + "]" * 200_000, "- " * 1_000_000 + "x"])
def test_pathological_nesting_is_refused_without_crashing_the_parser(text: str) -> None:
    # libyaml would overflow the C stack on these; the loader must not hand them to it.
    assert [c for c, _, _ in problems(text)] == ["yaml.too-complex"]


def test_a_float_key_beyond_float32_is_named_as_go_names_it() -> None:
    docs, found = documents.load_documents("1E100: a\n1.5: b\n", "f.yaml")
    assert docs[0].data == {".inf": "a", "1.5": "b"}  # FormatFloat says +Inf; sigs.k8s.io/yaml .inf
    assert [f.code for f in found] == ["yaml.key-not-string"]


def test_a_duplicate_key_in_a_configmap_value_names_the_first_ones_line_in_the_file() -> None:
    text = "kind: ConfigMap\ndata:\n  any: |\n    version: v1\n    version: v1\n"
    docs, _ = documents.load_documents(text, "cm.yaml")
    _, found = documents.load_nested(docs[0], ("data", "any"), docs[0].data["data"]["any"])
    [duplicate] = found
    assert (duplicate.code, duplicate.line) == ("yaml.duplicate-key", 5)
    assert "first defined on line 4" in duplicate.message  # the file's line, not the value's
