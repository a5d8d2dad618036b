"""The simulated plugin's config reader accepts and refuses what upstream does
(docs/upstream-facts.md P1.1-P1.8)."""

from __future__ import annotations

import pytest

from tests.fakes.cluster.pluginconfig import ConfigError, load

TS = "sharing:\n  timeSlicing:\n    resources:\n    - name: {name}\n      replicas: {replicas}\n"


def test_an_empty_file_and_a_null_document_mean_the_defaults() -> None:
    for text in (None, "", "null\n", "version: v1\n"):
        config = load(text, {})
        assert (config.mig_strategy, config.sharing.strategy, config.fail_on_init_error) == (
            "none",
            "none",
            True,
        )


def test_struct_keys_match_case_insensitively_and_unknown_keys_are_ignored() -> None:
    config = load("VERSION: v1\nFlags:\n  MIGSTRATEGY: mixed\n  bogus: 1\nextra: true\n", {})
    assert config.mig_strategy == "mixed"
    shared = load("Sharing:\n  TIMESLICING:\n    resources:\n    - {name: gpu, replicas: 3}\n", {})
    assert shared.sharing.strategy == "time-slicing"
    assert shared.sharing.resources[0].name == "nvidia.com/gpu"


def test_misplaced_sharing_keys_silently_mean_no_sharing() -> None:
    assert load("flags:\n  renameByDefault: true\n", {}).sharing.resources == ()
    assert (
        load(
            TS.replace("timeSlicing", "timeslicng").format(name="gpu", replicas=4), {}
        ).sharing.strategy
        == "none"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (TS.format(name="nvidia.com/gpu", replicas=1), "number of replicas must be >= 2"),
        (TS.format(name="nvidia.com/gpu", replicas='"4"'), "cannot unmarshal string"),
        (TS.format(name="nvidia.com/gpu", replicas=2.5), "cannot unmarshal number"),
        (TS.format(name="example.com/gpu", replicas=2), "incorrect format for resource name"),
        ("sharing:\n  timeSlicing: {}\n", "no resources specified"),
        (
            "sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      Replicas: 2\n",
            "no replicas specified",
        ),
        (
            "sharing:\n  timeSlicing:\n    resources:\n    - replicas: 2\n",
            "no resource name specified",
        ),
        (
            TS.format(name="gpu", replicas=2) + "      devices: some\n",
            "the only valid string input is 'all'",
        ),
        (TS.format(name="gpu", replicas=2) + "      rename: Not_Valid\n", "incorrect format"),
        ("version: v2\n", "unknown version: v2"),
        ("flags:\n  migStrategy: fancy\n", "unknown MIG strategy: fancy"),
        (
            "flags:\n  plugin:\n    deviceListStrategy: envvar,cdi-cri\n",
            "invalid strategy: envvar,cdi-cri",
        ),
        ("flags:\n  failOnInitError: sometimes\n", "cannot unmarshal string"),
        ("imex:\n  channelIDs: [1]\n", "channelIDs must be [] or [0]"),
        ("- a\n- b\n", "cannot unmarshal array"),
        ("flags: [\n", "error converting YAML to JSON"),
    ],
)
def test_runtime_validation_errors_make_the_plugin_exit(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load(text, {})


def test_mps_wins_needs_a_root_and_refuses_mixed() -> None:
    both = (
        TS.format(name="gpu", replicas=9)
        + "  mps:\n    resources:\n    - {name: gpu, replicas: 3}\n"
    )
    with pytest.raises(ConfigError, match="using MPS requires --mps-root"):
        load(both, {})
    config = load(both, {"MPS_ROOT": "/run/nvidia/mps"})
    assert config.sharing.strategy == "mps"
    assert config.sharing.resources[0].replicas == 3  # timeSlicing's 9 is dropped
    assert config.sharing.fail_requests_greater_than_one is True
    with pytest.raises(ConfigError, match="mixed is not supported with MPS"):
        load(both + "flags:\n  migStrategy: mixed\n", {"MPS_ROOT": "/run/nvidia/mps"})
    assert (
        load(TS.format(name="gpu", replicas=2), {}).sharing.fail_requests_greater_than_one is False
    )


def test_env_vars_win_over_the_file_and_must_parse() -> None:
    text = "flags:\n  migStrategy: mixed\n  failOnInitError: true\n"
    config = load(text, {"MIG_STRATEGY": "single", "FAIL_ON_INIT_ERROR": "false"})
    assert (config.mig_strategy, config.fail_on_init_error) == ("single", False)
    with pytest.raises(
        ConfigError, match='could not parse "yes" as bool value from env FAIL_ON_INIT_ERROR'
    ):
        load(text, {"FAIL_ON_INIT_ERROR": "yes"})


def test_rename_by_default_renames_and_custom_renames_are_dropped() -> None:
    renamed = load(
        "sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
        "    - {name: gpu, replicas: 2, rename: other}\n",
        {},
    )
    assert renamed.sharing.resources[0].rename == "nvidia.com/gpu.shared"
    custom = load(TS.format(name="gpu", replicas=2) + "      rename: other\n", {})
    assert custom.sharing.resources[0].rename == ""
