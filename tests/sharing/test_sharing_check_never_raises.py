"""check() runs on documents the schema rejected: whatever the shape, it returns findings."""

from __future__ import annotations

import pathlib
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_gpu import sharing
from kubectl_gpu.findings import Finding

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Keys the rules look at, so that random documents reach deep into check().
VOCABULARY = (
    "version flags sharing timeSlicing mps resources name rename devices replicas "
    "renameByDefault failRequestsGreaterThanOne migStrategy mpsRoot plugin gfd "
    "deviceListStrategy sharedDevicesAllocationPolicy sleepInterval imex channelIDs gpus mig "
    "pattern"
).split()

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(["all", "gpu", "nvidia.com/gpu", "mixed", "infinite", "envvar,cdi-cri", ""])
    | st.text(max_size=12)
)
keys = st.sampled_from(VOCABULARY) | st.text(max_size=6)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=30,
)


def _valid_documents() -> list[Any]:
    docs: list[Any] = []
    for file in sorted((ROOT / "examples" / "device-plugin" / "valid").glob("*.yaml")):
        doc = yaml.safe_load(file.read_text("utf-8"))
        if isinstance(doc, dict) and doc.get("kind") == "ConfigMap":
            docs.extend(yaml.safe_load(text) for text in doc["data"].values())
        elif doc is not None:
            docs.append(doc)
    return docs


VALID_DOCUMENTS = _valid_documents()


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths(item, (*prefix, index))
    return found


def replaced(doc: Any, path: tuple[Any, ...], new: Any, delete: bool) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(doc, dict):
        copy = dict(doc)
        if delete and not rest:
            del copy[head]
        else:
            copy[head] = replaced(doc[head], rest, new, delete)
        return copy
    copy_list = list(doc)
    copy_list[head] = replaced(doc[head], rest, new, delete)
    return copy_list


def assert_findings(result: Any) -> None:
    assert isinstance(result, list)
    assert all(isinstance(f, Finding) and f.code in sharing.RULES for f in result)


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_check_never_raises_on_arbitrary_values(doc: Any) -> None:
    assert_findings(sharing.check(doc))


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["version", "flags", "sharing", "imex", "resources"]), json_values
    )
)
def test_check_never_raises_on_arbitrary_top_level_sections(doc: Any) -> None:
    assert_findings(sharing.check(doc))


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_check_never_raises_on_mutated_valid_documents(data: st.DataObject) -> None:
    doc = data.draw(st.sampled_from(VALID_DOCUMENTS))
    path = data.draw(st.sampled_from(paths(doc)))
    delete = bool(path) and isinstance(path[-1], str) and data.draw(st.booleans())
    mutated = replaced(doc, path, data.draw(json_values), delete)
    assert_findings(sharing.check(mutated))
