"""The typed model of a device-plugin config: what the plugin will really share."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubectl_gpu import errors
from kubectl_gpu.sharing import (
    DevicePluginConfig,
    SharedResource,
    Sharing,
    normalise_resource_name,
)


@pytest.mark.parametrize(
    ("name", "full"),
    [
        ("gpu", "nvidia.com/gpu"),
        ("nvidia.com/gpu", "nvidia.com/gpu"),
        ("mig-1g.10gb", "nvidia.com/mig-1g.10gb"),
        # like upstream: a foreign prefix is not replaced but prefixed (and then invalid)
        ("example.com/gpu", "nvidia.com/example.com/gpu"),
    ],
)
def test_resource_names_are_normalised_as_upstream_does(name: str, full: str) -> None:
    assert normalise_resource_name(name) == full


def test_time_slicing_config() -> None:
    config = DevicePluginConfig.from_dict(
        {
            "version": "v1",
            "flags": {"migStrategy": "mixed"},
            "sharing": {
                "timeSlicing": {
                    "renameByDefault": True,
                    "resources": [
                        {"name": "gpu", "replicas": 4},
                        {"name": "mig-1g.10gb", "replicas": 2, "devices": [0, "1:0"]},
                    ],
                }
            },
        }
    )
    assert config.mig_strategy == "mixed"
    assert config.strategy == "time-slicing"
    assert config.sharing == Sharing(
        strategy="time-slicing",
        rename_by_default=True,
        fail_requests_greater_than_one=None,
        resources=(
            SharedResource("nvidia.com/gpu", 4),
            SharedResource("nvidia.com/mig-1g.10gb", 2, devices=(0, "1:0")),
        ),
    )
    assert not config.sharing.rejects_requests_greater_than_one  # unset means false here


def test_mps_rejects_requests_greater_than_one_unless_told_otherwise() -> None:
    doc: dict[str, Any] = {"sharing": {"mps": {"resources": [{"name": "gpu", "replicas": 2}]}}}
    config = DevicePluginConfig.from_dict(doc)
    assert config.strategy == "mps"
    assert config.sharing is not None and config.sharing.rejects_requests_greater_than_one
    doc["sharing"]["mps"]["failRequestsGreaterThanOne"] = False
    relaxed = DevicePluginConfig.from_dict(doc).sharing
    assert relaxed is not None and not relaxed.rejects_requests_greater_than_one


def test_mps_block_wins_over_time_slicing_as_upstream() -> None:
    config = DevicePluginConfig.from_dict(
        {
            "sharing": {
                "timeSlicing": {"resources": [{"name": "gpu", "replicas": 8}]},
                "mps": {"resources": [{"name": "gpu", "replicas": 2}]},
            }
        }
    )
    assert config.strategy == "mps"
    assert config.sharing is not None and config.sharing.resources[0].replicas == 2


@pytest.mark.parametrize("doc", [None, {}, {"version": "v1", "flags": {"migStrategy": "single"}}])
def test_no_sharing_means_strategy_none(doc: Any) -> None:
    config = DevicePluginConfig.from_dict(doc)
    assert config.sharing is None
    assert config.strategy == "none"


def test_strategy_is_none_when_nothing_is_replicated() -> None:
    # upstream reports a strategy only when some resource has replicas > 1
    config = DevicePluginConfig(
        "none", Sharing("time-slicing", False, None, (SharedResource("nvidia.com/gpu", 1),))
    )
    assert config.strategy == "none"


@pytest.mark.parametrize(
    ("rename_by_default", "advertised"),
    [(False, "nvidia.com/gpu"), (True, "nvidia.com/gpu.shared")],
)
def test_advertised_name_drops_custom_renames(rename_by_default: bool, advertised: str) -> None:
    resource = SharedResource("nvidia.com/gpu", 4, rename="nvidia.com/gpu-quarter")
    assert resource.advertised_name(rename_by_default) == advertised


def test_model_keeps_a_private_copy_of_the_document() -> None:
    doc = {"flags": {"migStrategy": "none", "plugin": {"passDeviceSpecs": True}}}
    before = copy.deepcopy(doc)
    config = DevicePluginConfig.from_dict(doc)
    config.raw["flags"]["plugin"]["passDeviceSpecs"] = False
    assert doc == before
    assert config.raw["flags"]["migStrategy"] == "none"


@pytest.mark.parametrize(
    "doc",
    [
        {"sharing": {"timeSlicing": []}},
        {"sharing": {"timeSlicing": {}}},
        {"sharing": {"mps": {"resources": [{"name": "gpu"}]}}},
        {"sharing": {"mps": {"resources": ["gpu"]}}},
    ],
)
def test_from_dict_refuses_documents_that_failed_validation(doc: Any) -> None:
    with pytest.raises(errors.ConfigError):
        DevicePluginConfig.from_dict(doc)
