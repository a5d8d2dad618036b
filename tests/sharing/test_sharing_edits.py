"""Editing a config for `kubectl gpu share`: the result is valid, the input is never touched."""

from __future__ import annotations

import copy
import json
import pathlib
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_gpu import errors, findings, sharing

ROOT = pathlib.Path(__file__).resolve().parents[2]
VALIDATOR = jsonschema.Draft202012Validator(
    json.loads((ROOT / "schemas" / "device-plugin-config.v1.json").read_text("utf-8"))
)


def assert_valid(doc: dict[str, Any]) -> None:
    assert [e.message for e in VALIDATOR.iter_errors(doc)] == []
    assert not findings.has_errors(sharing.check(doc)), sharing.check(doc)


def example_configs() -> list[tuple[str, Any]]:
    """Every config in the valid examples and shipped fixtures, ConfigMap keys included."""
    configs = []
    files = sorted((ROOT / "examples" / "device-plugin" / "valid").glob("*.yaml"))
    files += sorted((ROOT / "tests" / "data" / "device-plugin").glob("*.yaml"))
    for file in files:
        doc = yaml.safe_load(file.read_text("utf-8"))
        if isinstance(doc, dict) and doc.get("kind") == "ConfigMap":
            for key, text in doc["data"].items():
                configs.append((f"{file.stem}:{key}", yaml.safe_load(text)))
        else:
            configs.append((file.stem, doc))
    return configs


def edits() -> list[Any]:
    params = []
    for name, doc in example_configs():
        params.append(pytest.param(doc, False, id=f"{name}-time-slicing"))
        # MPS cannot be combined with migStrategy mixed: check() reports that as an error
        if sharing.DevicePluginConfig.from_dict(doc).mig_strategy != "mixed":
            params.append(pytest.param(doc, True, id=f"{name}-mps"))
    return params


@pytest.mark.parametrize(("doc", "mps"), edits())
def test_sharing_any_valid_config_gives_a_valid_config(doc: Any, mps: bool) -> None:
    before = copy.deepcopy(doc)
    edited = sharing.with_replicas(doc, 3, mps=mps)
    assert doc == before, "the input is never modified"
    assert_valid(edited)
    config = sharing.DevicePluginConfig.from_dict(edited)
    assert config.strategy == ("mps" if mps else "time-slicing")
    assert config.sharing is not None
    assert {r.name: r.replicas for r in config.sharing.resources}["nvidia.com/gpu"] == 3


def test_sharing_an_empty_config() -> None:
    assert sharing.with_replicas(None, 4) == {
        "version": "v1",
        "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}},
    }


def test_changing_replicas_keeps_everything_else() -> None:
    doc: dict[str, Any] = {
        "version": "v1",
        "flags": {"migStrategy": "mixed", "plugin": {"deviceListStrategy": ["envvar"]}},
        "sharing": {
            "timeSlicing": {
                "renameByDefault": True,
                "resources": [
                    {"name": "mig-1g.10gb", "replicas": 2},
                    {"name": "gpu", "replicas": 3, "devices": "all"},
                ],
            }
        },
        "imex": {"channelIDs": [0]},
    }
    before = copy.deepcopy(doc)
    edited = sharing.with_replicas(doc, 8)
    assert doc == before
    expected = copy.deepcopy(doc)
    expected["sharing"]["timeSlicing"]["resources"][1]["replicas"] = 8  # matched by its full name
    assert edited == expected
    assert_valid(edited)


def test_adding_a_second_resource_appends_it() -> None:
    doc = sharing.with_replicas({"flags": {"migStrategy": "mixed"}}, 2)
    edited = sharing.with_replicas(doc, 4, resource="nvidia.com/mig-1g.10gb")
    assert edited["sharing"]["timeSlicing"]["resources"] == [
        {"name": "nvidia.com/gpu", "replicas": 2},
        {"name": "nvidia.com/mig-1g.10gb", "replicas": 4},
    ]
    assert_valid(edited)


def test_switching_to_mps_replaces_time_slicing() -> None:
    doc = {
        "flags": {"mpsRoot": "/run/nvidia/mps"},
        "sharing": {
            "timeSlicing": {
                "renameByDefault": True,
                "failRequestsGreaterThanOne": False,
                "resources": [{"name": "nvidia.com/gpu", "replicas": 8}],
            }
        },
    }
    edited = sharing.with_replicas(doc, 4, mps=True)
    # failRequestsGreaterThanOne means something else under MPS, so it is not carried over
    assert edited["sharing"] == {
        "mps": {"renameByDefault": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}
    }
    assert sharing.check(edited) == []


def test_switching_back_to_time_slicing_removes_mps() -> None:
    doc = sharing.with_replicas({"flags": {"mpsRoot": "/mps"}}, 4, mps=True)
    edited = sharing.with_replicas(doc, 6)
    assert list(edited["sharing"]) == ["timeSlicing"]
    assert_valid(edited)


@pytest.mark.parametrize("value", [True, False])
def test_options_are_set_only_when_given(value: bool) -> None:
    doc = sharing.with_replicas(
        {}, 2, rename_by_default=value, fail_requests_greater_than_one=value
    )
    block = doc["sharing"]["timeSlicing"]
    assert (block["renameByDefault"], block["failRequestsGreaterThanOne"]) == (value, value)
    unchanged = sharing.with_replicas(doc, 5)["sharing"]["timeSlicing"]
    assert (unchanged["renameByDefault"], unchanged["failRequestsGreaterThanOne"]) == (value, value)


@pytest.mark.parametrize("replicas", [1, 0, -4, True, 2.0, "4"])
def test_replicas_below_two_are_refused(replicas: Any) -> None:
    with pytest.raises(errors.UsageError) as caught:
        sharing.with_replicas({}, replicas)
    assert "remove the sharing block" in caught.value.hint


@pytest.mark.parametrize("resource", ["nvidia.com/GPU", "example.com/gpu", "g" * 60, "gpu_1"])
def test_invalid_resource_names_are_refused(resource: str) -> None:
    with pytest.raises(errors.UsageError):
        sharing.with_replicas({}, 2, resource=resource)


def test_without_sharing_removes_only_the_sharing_block() -> None:
    doc = {
        "version": "v1",
        "flags": {"migStrategy": "none"},
        "sharing": {"timeSlicing": {"resources": [{"name": "gpu", "replicas": 4}]}},
    }
    before = copy.deepcopy(doc)
    edited = sharing.without_sharing(doc)
    assert doc == before
    assert edited == {"version": "v1", "flags": {"migStrategy": "none"}}
    assert sharing.DevicePluginConfig.from_dict(edited).strategy == "none"
    assert sharing.without_sharing(None) == {}


def test_edits_share_no_objects_with_the_input() -> None:
    doc = {"flags": {"plugin": {"deviceListStrategy": ["envvar"]}}}
    edited = sharing.with_replicas(doc, 2)
    edited["flags"]["plugin"]["deviceListStrategy"].append("cdi-cri")
    assert doc["flags"]["plugin"]["deviceListStrategy"] == ["envvar"]


@settings(max_examples=60, deadline=None)
@given(
    replicas=st.integers(min_value=2, max_value=48),
    resource=st.sampled_from(["gpu", "nvidia.com/gpu"]),
    mps=st.booleans(),
    rename=st.none() | st.booleans(),
    fail=st.none() | st.booleans(),
    start=st.sampled_from([None, {}, {"flags": {"migStrategy": "single", "mpsRoot": "/mps"}}]),
)
def test_every_edit_round_trips(
    replicas: int, resource: str, mps: bool, rename: Any, fail: Any, start: Any
) -> None:
    edited = sharing.with_replicas(
        start,
        replicas,
        resource=resource,
        mps=mps,
        rename_by_default=rename,
        fail_requests_greater_than_one=fail,
    )
    assert_valid(edited)
    block = sharing.DevicePluginConfig.from_dict(edited).sharing
    assert block is not None
    assert block.resources == (sharing.SharedResource("nvidia.com/gpu", replicas),)
    assert block.strategy == ("mps" if mps else "time-slicing")
