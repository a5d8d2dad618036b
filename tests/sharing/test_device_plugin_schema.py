"""The device-plugin config schema on its own: closed everywhere, upstream's vocabulary, and the
known misplacements named, checked with jsonschema directly."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schemas" / "device-plugin-config.v1.json").read_text("utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def objects(schema: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every subschema that describes an object, with where it is."""
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            yield path, schema
        for key, value in schema.items():
            yield from objects(value, f"{path}/{key}")
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            yield from objects(value, f"{path}/{index}")


def errors(doc: Any) -> list[tuple[str, tuple[Any, ...]]]:
    return sorted((e.validator, tuple(e.absolute_path)) for e in VALIDATOR.iter_errors(doc))


def test_schema_is_valid_draft_2020_12_with_id_and_title() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA["$id"] == "https://kubectl-gpu.io/schemas/device-plugin-config.v1.json"
    assert SCHEMA["title"] and SCHEMA["description"]
    assert SCHEMA["properties"]["version"]["const"] == "v1"


def test_every_object_is_closed() -> None:
    found = list(objects(SCHEMA))
    assert len(found) >= 9
    assert [path for path, obj in found if obj.get("additionalProperties") is not False] == []


def resolve(dotted: str) -> dict[str, Any]:
    """The subschema at a dotted place such as sharing.mps.resources[].replicas."""
    node: dict[str, Any] = SCHEMA
    for part in dotted.split("."):
        node = node["properties"][part.removesuffix("[]")]
        if part.endswith("[]"):
            node = node["items"]
    return node


def test_every_misplacement_points_at_a_real_key_of_the_same_name() -> None:
    moves = [
        (key, target)
        for _, obj in objects(SCHEMA)
        for key, target in obj.get("x-moved", {}).items()
    ]
    assert len(moves) > 50
    for key, target in moves:
        for place in target.split(" or "):
            assert place.rsplit(".", 1)[-1] == key, (key, place)
            assert "type" in resolve(place) or "enum" in resolve(place), place


@pytest.mark.parametrize(
    ("section", "keys"),
    [
        (
            ("flags",),
            "migStrategy failOnInitError mpsRoot nvidiaDriverRoot nvidiaDevRoot gdrcopyEnabled "
            "gdsEnabled mofedEnabled useNodeFeatureAPI deviceDiscoveryStrategy plugin gfd",
        ),
        (
            ("flags", "plugin"),
            "passDeviceSpecs deviceListStrategy deviceIDStrategy cdiAnnotationPrefix "
            "nvidiaCTKPath containerDriverRoot sharedDevicesAllocationPolicy",
        ),
        (("flags", "gfd"), "oneshot noTimestamp sleepInterval outputFile machineTypeFile"),
        (("sharing",), "timeSlicing mps"),
        (("sharing", "timeSlicing"), "renameByDefault failRequestsGreaterThanOne resources"),
        (("sharing", "mps"), "renameByDefault failRequestsGreaterThanOne resources"),
        (("imex",), "channelIDs required"),
        (("resources",), "gpus mig"),
    ],
)
def test_known_keys_match_upstream(section: tuple[str, ...], keys: str) -> None:
    node = SCHEMA
    for key in section:
        node = node["properties"][key]
    assert set(node["properties"]) == set(keys.split())


@pytest.mark.parametrize("block", ["timeSlicing", "mps"])
def test_resource_entries_take_name_rename_devices_replicas(block: str) -> None:
    entry = SCHEMA["properties"]["sharing"]["properties"][block]["properties"]["resources"]["items"]
    assert set(entry["properties"]) == {"name", "rename", "devices", "replicas"}
    assert entry["properties"]["replicas"]["type"] == "integer"


def config(**flags: Any) -> dict[str, Any]:
    return {"version": "v1", "flags": flags}


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"version": "v2"}, [("const", ("version",))]),
        (config(migStrategy="Mixed"), [("enum", ("flags", "migStrategy"))]),
        (config(deviceDiscoveryStrategy="cuda"), [("enum", ("flags", "deviceDiscoveryStrategy"))]),
        (
            config(plugin={"deviceIDStrategy": "serial"}),
            [("enum", ("flags", "plugin", "deviceIDStrategy"))],
        ),
        (
            config(plugin={"sharedDevicesAllocationPolicy": "spread"}),
            [("enum", ("flags", "plugin", "sharedDevicesAllocationPolicy"))],
        ),
        (
            config(plugin={"deviceListStrategy": "cdi"}),
            [("pattern", ("flags", "plugin", "deviceListStrategy"))],
        ),
        (
            config(plugin={"deviceListStrategy": ["envvar", "cdi"]}),
            [("enum", ("flags", "plugin", "deviceListStrategy", 1))],
        ),
        (config(gfd={"sleepInterval": "60"}), [("pattern", ("flags", "gfd", "sleepInterval"))]),
        (
            config(gfd={"sleepInterval": "1 minute"}),
            [("pattern", ("flags", "gfd", "sleepInterval"))],
        ),
        (config(gfd={"sleepInterval": True}), [("type", ("flags", "gfd", "sleepInterval"))]),
        (config(failOnInitError="true"), [("type", ("flags", "failOnInitError"))]),
        (config(renameByDefault=True), [("additionalProperties", ("flags",))]),
        (
            {"sharing": {"timeSlicing": {"resources": [{"name": "gpu", "replicas": "4"}]}}},
            [("type", ("sharing", "timeSlicing", "resources", 0, "replicas"))],
        ),
        (
            {"sharing": {"mps": {"resources": [{"name": "gpu"}]}}},
            [("required", ("sharing", "mps", "resources", 0))],
        ),
        (
            {"sharing": {"mps": {"resources": [{"name": "gpu", "replicas": 2, "devices": True}]}}},
            [("type", ("sharing", "mps", "resources", 0, "devices"))],
        ),
        ({"resources": {"gpus": [{"name": "gpu"}]}}, [("required", ("resources", "gpus", 0))]),
        ({"imex": {"channelIDs": ["0"]}}, [("type", ("imex", "channelIDs", 0))]),
    ],
)
def test_schema_rejects(doc: Any, expected: list[tuple[str, tuple[Any, ...]]]) -> None:
    assert errors(doc) == expected


@pytest.mark.parametrize(
    "interval", ["60s", "1m30s", "1.5h", "500ms", "10us", "10µs", "0", "-1s", "infinite", 60e9, 0]
)
def test_sleep_interval_takes_go_durations(interval: Any) -> None:
    assert errors(config(gfd={"sleepInterval": interval})) == []


@pytest.mark.parametrize(
    "strategy", ["envvar", ["volume-mounts"], ["cdi-annotations", "cdi-cri"], "envvar,cdi-cri"]
)
def test_device_list_strategy_forms_the_schema_accepts(strategy: Any) -> None:
    # a comma-joined string of valid names is the semantic check's to explain
    assert errors(config(plugin={"deviceListStrategy": strategy})) == []


def test_upstream_wording_is_carried_for_enum_flags() -> None:
    flags = SCHEMA["properties"]["flags"]["properties"]
    assert flags["migStrategy"]["x-message"]["enum"] == "unknown MIG strategy: {value}"
    plugin = flags["plugin"]["properties"]
    assert plugin["deviceIDStrategy"]["x-message"]["enum"] == (
        "invalid --device-id-strategy option: {value}"
    )
    assert SCHEMA["properties"]["version"]["x-message"]["const"] == "unknown version: {value}"


@pytest.mark.parametrize(
    ("parent", "key", "target"),
    [
        (("flags",), "renameByDefault", "sharing.timeSlicing.renameByDefault"),
        (
            ("flags",),
            "failRequestsGreaterThanOne",
            "sharing.timeSlicing.failRequestsGreaterThanOne",
        ),
        (("flags",), "timeSlicing", "sharing.timeSlicing"),
        (("flags",), "replicas", "sharing.timeSlicing.resources[].replicas"),
        (("flags",), "resources", "sharing.timeSlicing.resources"),
        ((), "timeSlicing", "sharing.timeSlicing"),
        ((), "mps", "sharing.mps"),
        ((), "migStrategy", "flags.migStrategy"),
        (("sharing",), "replicas", "sharing.timeSlicing.resources[].replicas"),
        (("sharing",), "resources", "sharing.timeSlicing.resources"),
        (("sharing", "mps"), "mpsRoot", "flags.mpsRoot"),
        (("sharing", "timeSlicing"), "replicas", "sharing.timeSlicing.resources[].replicas"),
    ],
)
def test_known_misplacements_are_named(parent: tuple[str, ...], key: str, target: str) -> None:
    node = SCHEMA
    for part in parent:
        node = node["properties"][part]
    assert target in node["x-moved"][key].split(" or ")


def test_shipped_fixtures_and_valid_examples_pass_the_schema() -> None:
    files = sorted((ROOT / "tests" / "data" / "device-plugin").glob("*.yaml"))
    files += sorted((ROOT / "examples" / "device-plugin" / "valid").glob("*.yaml"))
    checked = 0
    for file in files:
        doc = yaml.safe_load(file.read_text("utf-8"))
        configs = doc["data"].values() if doc and doc.get("kind") == "ConfigMap" else [doc]
        for text in configs:
            body = yaml.safe_load(text) if isinstance(text, str) else text
            if body is not None:
                assert errors(body) == [], file.name
                checked += 1
    assert checked >= 10
