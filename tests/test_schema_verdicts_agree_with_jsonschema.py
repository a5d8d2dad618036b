"""The compiled schema checks (`conformance`) that spare `validate` importing jsonschema give
jsonschema's own verdict: on every shipped example, on each part of them against every
schema, and on generated documents, mutated from those examples. A yes where jsonschema says
no would let a broken config pass `validate` silently, so the two must agree."""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubectl_gpu import conformance, validation

DATA = Path(__file__).parent / "data"
SCHEMAS = sorted(
    p.name.removesuffix(".json")
    for p in (resources.files("kubectl_gpu") / "schemas").iterdir()
    if p.name.endswith(".json")
)


def schema(name: str) -> Any:
    return json.loads((resources.files("kubectl_gpu") / "schemas" / f"{name}.json").read_text())


def parts(value: Any) -> Iterator[Any]:
    """A value and every value inside it, embedded YAML texts (ConfigMap data) read too."""
    yield value
    if isinstance(value, dict):
        for item in value.values():
            yield from parts(item)
    elif isinstance(value, list):
        for item in value:
            yield from parts(item)
    elif isinstance(value, str) and "\n" in value:
        try:
            yield from parts(yaml.safe_load(value))
        except yaml.YAMLError:
            pass


def examples() -> list[Any]:
    found: list[Any] = []
    for path in sorted(DATA.rglob("*")):
        if path.suffix in (".yaml", ".yml", ".json"):
            for document in yaml.safe_load_all(path.read_text()):
                found.extend(parts(document))
    return found


EXAMPLES = examples()


def agree(name: str, data: Any) -> None:
    check = conformance.compile(schema(name))
    assert check is not None, f"{name} uses a keyword the compiled check does not evaluate"
    theirs = jsonschema.Draft202012Validator(schema(name)).is_valid(data)
    assert check(data) == theirs, (name, data)


@pytest.mark.parametrize("name", SCHEMAS)
def test_every_shipped_schema_compiles_and_agrees_on_every_example(name: str) -> None:
    assert len(EXAMPLES) > 100
    for data in EXAMPLES:
        agree(name, data)


def test_the_kinds_validate_checks_are_compiled() -> None:
    names = {k.schema for k in validation.KINDS.values() if k.schema}
    assert names <= set(SCHEMAS)
    assert all(conformance.compile(schema(n)) is not None for n in names)


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 300),
    st.floats(allow_nan=False, width=32),
    st.sampled_from([0, 1, 1.0, 2.0, "", "v1", "none", "single", "mixed", "all", "nvidia.com/gpu",
                     "true", "1g.10gb", "-", "x" * 70]),
)  # fmt: skip
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["version", "flags", "sharing", "devices",
                                         "mig-enabled", "mig-devices", "replicas", "name", "x"]),
                        inner, max_size=3),
    ),
    max_leaves=6,
)  # fmt: skip


def mutate(value: Any, path: list[int], replacement: Any) -> Any:
    """`value` with the node reached by `path` (indices into its items) replaced."""
    if not path:
        return replacement
    if isinstance(value, dict) and value:
        key = list(value)[path[0] % len(value)]
        return {**value, key: mutate(value[key], path[1:], replacement)}
    if isinstance(value, list) and value:
        i = path[0] % len(value)
        return [*value[:i], mutate(value[i], path[1:], replacement), *value[i + 1 :]]
    return replacement


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(SCHEMAS),
    base=st.sampled_from(EXAMPLES),
    path=st.lists(st.integers(0, 50), max_size=5),
    replacement=VALUES,
    drop=st.booleans(),
)
def test_mutated_examples_get_jsonschemas_verdict(
    name: str, base: Any, path: list[int], replacement: Any, drop: bool
) -> None:
    data = mutate(base, path, replacement)
    if drop and isinstance(data, dict) and data:
        data = dict(list(data.items())[1:])
    agree(name, data)
