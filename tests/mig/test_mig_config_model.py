"""A validated mig-parted config becomes typed values the planner can use, and names resolve."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubectl_gpu.errors import ConfigError, GpuError
from kubectl_gpu.mig import profiles, spec
from kubectl_gpu.mig.spec import DeviceFilter, MigConfigFile, MigConfigNotFoundError

DATA = Path(__file__).resolve().parent.parent / "data" / "mig"
A100_40GB, A30 = 0x20B010DE, 0x20B710DE


def load(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((DATA / name).read_text())
    assert isinstance(doc, dict)
    return doc


def test_nvidia_default_config_loads_every_name() -> None:
    model = MigConfigFile.from_dict(load("mig-parted__deployments__systemd__config-default.yaml"))
    assert len(model.names) == 81
    assert model.names[:2] == ("all-disabled", "all-enabled")


def test_a_spec_keeps_devices_filter_mode_and_profiles_in_file_order() -> None:
    model = MigConfigFile.from_dict(load("mig-parted__examples__config.yaml"))
    (balanced,) = model.select("all-balanced")
    assert balanced.devices == "all"
    assert balanced.device_filter == ()
    assert balanced.mig_enabled is True
    assert [(p.name, n) for p, n in balanced.mig_devices] == [
        ("1g.5gb", 2),
        ("2g.10gb", 1),
        ("3g.20gb", 1),
    ]
    custom = model.select("custom-config")
    assert [s.devices for s in custom] == [(0, 1, 2, 3), (4,), (5,), (6,), (7,)]
    assert custom[0].mig_enabled is False and custom[0].mig_devices == ()


def test_filters_are_kept_as_a_tuple_whether_written_as_string_or_list() -> None:
    model = MigConfigFile.from_dict(load("mig-parted__deployments__systemd__config-default.yaml"))
    filters = {s.device_filter for s in model.select("all-balanced")}
    assert ("0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE") in filters
    assert ("0x20B710DE",) in filters
    all_1g_10gb = model.select("all-1g.10gb")
    assert all(isinstance(s.device_filter, tuple) and s.device_filter for s in all_1g_10gb)


def test_names_meaning_one_profile_are_summed_and_zero_counts_dropped() -> None:
    doc = {
        "version": "v1",
        "mig-configs": {
            "x": [
                {
                    "devices": [0, 1.0],
                    "device-filter": "",
                    "mig-enabled": True,
                    "mig-devices": {"7g.80gb": 1, "7c.7g.80gb": 1, "1g.10gb": 0},
                }
            ]
        },
    }
    (one,) = MigConfigFile.from_dict(doc).select("x")
    assert one.mig_devices == ((profiles.parse("7g.80gb"), 2),)
    assert one.devices == (0, 1)
    assert one.device_filter == ()


def test_the_model_is_immutable() -> None:
    model = MigConfigFile.from_dict(load("mig-parted__examples__config.yaml"))
    with pytest.raises(TypeError):
        model.configs["new"] = ()  # type: ignore[index]
    with pytest.raises(AttributeError):
        model.select("all-disabled")[0].mig_enabled = True  # type: ignore[misc]


def test_selecting_a_missing_config_uses_mig_parteds_words_and_lists_the_names() -> None:
    model = MigConfigFile.from_dict(load("mig-parted__examples__config.yaml"))
    with pytest.raises(MigConfigNotFoundError) as caught:
        model.select("all-balance")
    assert caught.value.message == "selected mig-config not present: all-balance"
    assert caught.value.hint.startswith("did you mean 'all-balanced'? available: all-disabled,")
    assert "custom-config" in caught.value.hint
    assert isinstance(caught.value, GpuError)


def test_a_name_nothing_resembles_gets_only_the_list() -> None:
    model = MigConfigFile.from_dict(load("mig-parted__examples__config.yaml"))
    with pytest.raises(MigConfigNotFoundError) as caught:
        model.select("zzzz")
    assert caught.value.hint.startswith("available: all-disabled, all-enabled,")


def test_from_dict_on_an_invalid_document_is_a_config_error_not_a_crash() -> None:
    with pytest.raises(ConfigError):
        MigConfigFile.from_dict({"version": "v1"})
    with pytest.raises(ConfigError):
        MigConfigFile.from_dict({"mig-configs": {"x": [{"devices": "all"}]}})
    with pytest.raises(ConfigError):
        MigConfigFile.from_dict(
            {"mig-configs": {"x": [{"devices": "all", "mig-enabled": True,
                                    "mig-devices": {"1g.10GB": 1}}]}}
        )  # fmt: skip
    with pytest.raises(ConfigError):
        MigConfigFile.from_dict(
            {"mig-configs": {"x": [{"devices": "all", "mig-enabled": True,
                                    "mig-devices": {"1g.10gb": float("inf")}}]}}
        )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("0x20B010DE", DeviceFilter(0x20B010DE)),
        ("0x20b010de:0x145F10DE", DeviceFilter(0x20B010DE, 0x145F10DE)),
        ("0X20B010DE", DeviceFilter(0x20B010DE)),
        ("20B010DE", None),
        # mig-parted reads each half with Go's ParseUint(s, 0, 32): these name IDs too
        ("0x20B010D", DeviceFilter(0x020B010D)),
        ("0x20B0_10DE", DeviceFilter(0x20B010DE)),
        ("548409566", DeviceFilter(0x20B010DE)),
        ("0o4054010336", DeviceFilter(0x20B010DE)),
        ("04054010336", DeviceFilter(0x20B010DE)),
        ("0b100000101100000001000011011110", DeviceFilter(0x20B010DE)),
        ("0x20B010DE_", None),
        ("0x1_0000_0000", None),
        ("２0", None),
        ("0x20B010DE:", None),
        ("A100", None),
    ],
)
def test_device_filter_text(text: str, parsed: DeviceFilter | None) -> None:
    assert spec.parse_device_filter(text) == parsed


def test_which_gpus_a_spec_selects() -> None:
    model = MigConfigFile.from_dict(load("mig-parted__examples__dgx-station-80gb-config.yaml"))
    specs = model.select("balanced-k8s-dgx-station-80")
    a100_80gb, display = 0x20B210DE, 0x1FB010DE
    # GPU 2 is an A100 80GB: only the third spec (devices [2], the A100 filter) selects it.
    assert [s.selects(2, a100_80gb) for s in specs] == [False, False, True, False, False]
    # GPU 3 is the display GPU: only the last spec selects it.
    assert [s.selects(3, display) for s in specs] == [False, False, False, False, True]
    # A GPU of a model no filter names is selected by nothing.
    assert not any(s.selects(0, A30) for s in specs)


def test_a_subsystem_filter_needs_all_four_ids_to_match() -> None:
    only_one_board = spec.MigDeviceSpec("all", ("0x20B010DE:0x145F10DE",), False, ())
    assert only_one_board.selects(0, A100_40GB, 0x145F10DE)
    assert not only_one_board.selects(0, A100_40GB, 0x147E10DE)
    assert not only_one_board.selects(0, A100_40GB)
    any_board = spec.MigDeviceSpec("all", ("0x20B010DE",), False, ())
    assert any_board.selects(5, A100_40GB, 0x147E10DE)
    assert not any_board.selects(5, A30)


def test_no_filter_selects_every_model_and_devices_limit_indices() -> None:
    some = spec.MigDeviceSpec((1, 3), (), True, ())
    assert [some.selects(i, A30) for i in range(5)] == [False, True, False, True, False]
