"""Grammar edges where libyaml and NVIDIA's Go reader (go.yaml.in/yaml/v2) part, read as Go does.

Each expectation is the device-plugin oracle's `-read-yaml` answer (docs/validate-vs-upstream.md,
"The YAML conformance corpora"); tests/differential runs the whole corpora through both readers.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubectl_gpu import documents
from kubectl_gpu.findings import Severity

REFUSED = object()


def read(text: str) -> tuple[Any, list[str]]:
    docs, found = documents.load_documents(text, "f.yaml")
    errors = [f.code for f in found if f.severity is Severity.ERROR]
    return (REFUSED if errors else docs[0].data), errors


@pytest.mark.parametrize(
    ("text", "go"),
    [
        # a plain scalar ends at `?` inside [ ] or { }: "did not find expected ',' or ']'"
        ("devices: [a?b]\n", REFUSED),
        ("a: [another ? string]\n", REFUSED),
        ("a: {b ? c: d}\n", REFUSED),
        ("- another ? string\n", ["another ? string"]),  # outside them it is text
        # a tag may hold a comma
        ("- !!str, xxx\n", ["xxx"]),
        ("a: [!!str, x]\n", {"a": ["x"]}),
        ("a: !foo, x\n", {"a": "x"}),
        # %YAML: tabs before the version, a comment right after it
        ("%YAML \t 1.1\n---\na: 1\n", {"a": 1}),
        ("%YAML 1.1#c\n---\na: 1\n", {"a": 1}),
        # `!!null` as a key is a null key: "unsupported map key"
        ("!!null : a\nb: c\n", REFUSED),
        ("- <<\n- =\n", ["<<", "="]),
        (".inf: a\n-.inf: b\n.nan: c\n", {".inf": "a", "-.inf": "b", ".nan": "c"}),
        ("max: 0b" + "1" * 64 + "\n", {"max": 2**64 - 1}),
    ],
)
def test_the_edge_reads_as_nvidias_reader_reads_it(text: str, go: Any) -> None:
    data, errors = read(text)
    assert data == go, errors


def test_a_colon_before_a_flow_indicator_is_refused_saying_what_go_would_read() -> None:
    """Go reads `{a:,}` as the key "a:"; refused on purpose (a typo for `a: ,`)."""
    docs, found = documents.load_documents("x: [1]\nz: {a:, b: ?c}\n", "f.yaml")
    [problem] = [f for f in found if f.severity is Severity.ERROR]
    assert problem.code == "yaml.syntax"
    assert "colon part of the text" in problem.message and problem.line == 2
