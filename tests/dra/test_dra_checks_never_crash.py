"""Whatever a DRA object holds, `validate` answers with findings, never a traceback: every
node of every DRA example is replaced in turn by values of every wrong type."""

from __future__ import annotations

import copy
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_gpu import dra, validation

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "dra").glob("*/*.yaml"))
ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["name", "kind", "x", "strategy"]), st.none(), max_size=2),
)


def paths(data: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(data, dict):
        for key, value in data.items():
            yield from paths(value, (*prefix, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from paths(value, (*prefix, index))


def replaced(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copied = copy.deepcopy(data)
    holder = copied
    for item in path[:-1]:
        holder = holder[item]
    holder[path[-1]] = value
    return copied


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
@settings(max_examples=60, deadline=None)
@given(choice=st.integers(min_value=0), value=ODD)
def test_any_node_of_any_type_gives_findings_not_a_crash(
    example: pathlib.Path, choice: int, value: Any
) -> None:
    data = yaml.safe_load(example.read_text("utf-8"))
    every = list(paths(data))
    path = every[choice % len(every)]
    broken = replaced(data, path, value)
    if isinstance(broken, dict) and broken.get("kind") != "List":
        dra.check(broken, dra.catalogue([broken]))  # the domain on its own
    report = validation.validate_text(yaml.safe_dump(broken), "broken.yaml")
    assert all(f.message for f in report.findings)
