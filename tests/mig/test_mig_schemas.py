"""The three mig-parted schemas: valid Draft 2020-12, closed, and accepting NVIDIA's files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent.parent
DATA = ROOT / "tests" / "data" / "mig"
NAMES = ["mig-config.v1", "mig-parted-hooks.v1", "mig-manager-gpu-clients.v1"]
# Mappings whose keys are the user's (config names, profile names, variable names).
OPEN_MAPS = {
    "mig-config.v1": {"/properties/mig-configs", "/$defs/spec/properties/mig-devices"},
    "mig-parted-hooks.v1": {"/$defs/hook/properties/envs"},
    "mig-manager-gpu-clients.v1": set(),
}


def load(name: str) -> dict[str, Any]:
    schema = json.loads((ROOT / "schemas" / f"{name}.json").read_text())
    assert isinstance(schema, dict)
    return schema


def subschemas(node: Any, where: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        yield where, node
        for key, value in node.items():
            if not key.startswith("x-"):
                yield from subschemas(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from subschemas(value, f"{where}/{i}")


@pytest.mark.parametrize("name", NAMES)
def test_schema_is_valid_draft_2020_12_with_id_and_title(name: str) -> None:
    schema = load(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"https://kubectl-gpu.io/schemas/{name}.json"
    assert schema["title"] and schema["description"]
    assert schema["properties"]["version"]["const"] == "v1"


@pytest.mark.parametrize("name", NAMES)
def test_every_object_is_closed_except_user_keyed_maps(name: str) -> None:
    open_maps = set()
    for where, node in subschemas(load(name)):
        types = node.get("type")
        if types == "object" or (isinstance(types, list) and "object" in types):
            if node.get("additionalProperties") is not False:
                open_maps.add(where)
    assert open_maps == OPEN_MAPS[name]


@pytest.mark.parametrize("name", NAMES)
def test_message_templates_format_with_value_and_field(name: str) -> None:
    templates = [
        text
        for _, node in subschemas(load(name))
        for key in ("x-message", "x-hint")
        for text in node.get(key, {}).values()
    ]
    assert templates
    for text in templates:
        text.format(value="v", field="f")  # a stray brace would crash the translator


@pytest.mark.parametrize(
    ("file", "name"),
    [
        ("mig-parted__deployments__systemd__config-default.yaml", "mig-config.v1"),
        ("gpu-operator__assets__state-mig-manager__0400_configmap__config.yaml", "mig-config.v1"),
        ("mig-parted__examples__config.yaml", "mig-config.v1"),
        ("mig-parted__examples__dgx-station-80gb-config.yaml", "mig-config.v1"),
        ("mig-parted__deployments__systemd__hooks-default.yaml", "mig-parted-hooks.v1"),
        ("mig-parted__deployments__systemd__hooks-minimal.yaml", "mig-parted-hooks.v1"),
        ("gpu-operator__assets__state-mig-manager__0410_configmap__clients.yaml",
         "mig-manager-gpu-clients.v1"),
    ],
)  # fmt: skip
def test_nvidias_files_match_the_schema(file: str, name: str) -> None:
    doc = yaml.safe_load((DATA / file).read_text())
    jsonschema.Draft202012Validator(load(name)).validate(doc)


def errors(doc: Any) -> list[tuple[str, tuple[Any, ...]]]:
    validator = jsonschema.Draft202012Validator(load("mig-config.v1"))
    return sorted((e.validator, tuple(e.absolute_path)) for e in validator.iter_errors(doc))


def spec(**fields: Any) -> dict[str, Any]:
    return {"version": "v1", "mig-configs": {"c": [fields]}}


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"mig-configs": {"c": [{"devices": "all", "mig-enabled": False}]}},
         [("required", ())]),
        ({"version": "v1"}, []),  # mig-parted parses it; validate warns (mig.no-configs)
        ({"version": "v1", "mig-configs": {}}, [("minProperties", ("mig-configs",))]),
        ({"version": "v1", "mig-configs": {"c": []}}, [("minItems", ("mig-configs", "c"))]),
        (spec(devices="some", **{"mig-enabled": False}),
         [("const", ("mig-configs", "c", 0, "devices"))]),
        (spec(devices=[0, -1], **{"mig-enabled": False}),
         [("minimum", ("mig-configs", "c", 0, "devices", 1))]),
        (spec(devices=True, **{"mig-enabled": False}),
         [("type", ("mig-configs", "c", 0, "devices"))]),
        (spec(devices="all", **{"mig-enabled": "true"}),
         [("type", ("mig-configs", "c", 0, "mig-enabled"))]),
        (spec(devices="all", **{"mig-enabled": True, "mig-devices": {"1g.5gb": -1}}),
         [("minimum", ("mig-configs", "c", 0, "mig-devices", "1g.5gb"))]),
        (spec(devices="all", **{"mig-enabled": True, "device-filter": 548409566}),
         [("type", ("mig-configs", "c", 0, "device-filter"))]),
        (spec(devices="all", **{"mig-enabled": False, "extra": 1}),
         [("additionalProperties", ("mig-configs", "c", 0))]),
        (spec(**{"mig-enabled": False}), [("required", ("mig-configs", "c", 0))]),
        (spec(devices=[0, 1.0], **{"mig-enabled": True, "mig-devices": {"1g.5gb": 7.0},
                                   "device-filter": ["0x20B010DE"]}), []),
    ],
)  # fmt: skip
def test_mig_config_structure_errors(doc: Any, expected: list[tuple[str, tuple[Any, ...]]]) -> None:
    assert errors(doc) == expected
