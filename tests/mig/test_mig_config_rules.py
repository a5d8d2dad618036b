"""The semantic rules of mig-parted configs: each one fires where it should, and only there."""

from __future__ import annotations

from typing import Any

import pytest

from kubectl_gpu.findings import Finding, Severity
from kubectl_gpu.mig import spec

E, W = Severity.ERROR, Severity.WARNING


def config(*specs: dict[str, Any], name: str = "custom") -> dict[str, Any]:
    return {"version": "v1", "mig-configs": {name: list(specs)}}


def enabled(devices: object = "all", **profiles_and_counts: int) -> dict[str, Any]:
    return {"devices": devices, "mig-enabled": True, "mig-devices": profiles_and_counts}


def counts(mapping: dict[str, Any], devices: object = "all") -> dict[str, Any]:
    return {"devices": devices, "mig-enabled": True, "mig-devices": mapping}


def disabled(devices: object = "all", **extra: Any) -> dict[str, Any]:
    return {"devices": devices, "mig-enabled": False, **extra}


def summary(found: list[Finding]) -> list[tuple[Severity, str, tuple[object, ...], bool]]:
    return [(f.severity, f.code, f.path, f.at_key) for f in found]


MD = ("mig-configs", "custom", 0, "mig-devices")
S0 = ("mig-configs", "custom", 0)

CASES: list[tuple[str, dict[str, Any], list[tuple[Severity, str, tuple[object, ...], bool]]]] = [
    ("valid layout", config(counts({"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1})), []),
    ("enabled without instances", config(counts({})), []),
    ("disabled with empty mig-devices", config(disabled(**{"mig-devices": {}})), []),
    ("bad profile format", config(counts({"1g.10GB": 1})),
     [(E, "mig.bad-profile-format", (*MD, "1g.10GB"), True)]),
    ("impossible profile", config(counts({"3c.4g.40gb": 1})),
     [(E, "mig.impossible-profile", (*MD, "3c.4g.40gb"), True)]),
    ("non-canonical profile", config(counts({"7c.7g.80gb": 1})),
     [(W, "mig.non-canonical-profile", (*MD, "7c.7g.80gb"), True)]),
    ("all counts zero", config(counts({"1g.10gb": 0, "2g.20gb": 0})),
     [(E, "mig.all-counts-zero", MD, True)]),
    ("one count zero", config(counts({"1g.10gb": 7, "2g.20gb": 0})),
     [(W, "mig.zero-count", (*MD, "2g.20gb"), False)]),
    ("enabled, no mig-devices", config({"devices": "all", "mig-enabled": True}),
     [(E, "mig.missing-mig-devices", (*S0, "mig-enabled"), False)]),
    ("disabled with instances", config(disabled(**{"mig-devices": {"1g.10gb": 7}})),
     [(E, "mig.devices-when-disabled", MD, True)]),
    ("disabled, only zero counts", config(disabled(**{"mig-devices": {"1g.10gb": 0}})),
     [(E, "mig.all-counts-zero", MD, True), (E, "mig.devices-when-disabled", MD, True)]),
    ("model name as filter", config(disabled(**{"device-filter": "A100"})),
     [(E, "mig.bad-device-filter", (*S0, "device-filter"), False)]),
    ("device ID without vendor", config(disabled(**{"device-filter": ["0x20B010DE", "0x20B0"]})),
     [(E, "mig.bad-device-filter", (*S0, "device-filter", 1), False)]),
    ("empty subsystem", config(disabled(**{"device-filter": "0x20B010DE:"})),
     [(E, "mig.bad-device-filter", (*S0, "device-filter"), False)]),
    ("three parts", config(disabled(**{"device-filter": "0x20B010DE:0x20B010DE:0x20B010DE"})),
     [(E, "mig.bad-device-filter", (*S0, "device-filter"), False)]),
    ("decimal filter", config(disabled(**{"device-filter": "548409566"})),
     [(W, "mig.device-filter-form", (*S0, "device-filter"), False)]),
    ("short hex with device", config(disabled(**{"device-filter": "0x20B010DE:0x10DE"})),
     [(W, "mig.device-filter-form", (*S0, "device-filter"), False)]),
    ("lower-case hex and subsystem", config(disabled(**{"device-filter": "0x20b010de:0x145F10DE"})),
     []),
    ("empty filter string", config(disabled(**{"device-filter": ""})), []),
    ("empty filter list", config(disabled(**{"device-filter": []})), []),
    ("duplicate index", config(disabled([0, 1, 0])),
     [(W, "mig.duplicate-device", (*S0, "devices", 2), False)]),
    ("duplicate as 1.0", config(disabled([1, 1.0])),
     [(W, "mig.duplicate-device", (*S0, "devices", 1), False)]),
    ("empty devices", config(disabled([])), [(W, "mig.no-devices", (*S0, "devices"), False)]),
    ("two +me", config(counts({"1g.10gb+me": 2})),
     [(E, "mig.too-many-me", (*MD, "1g.10gb+me"), False)]),
    ("two different +me", config(counts({"1g.6gb+me": 1, "2g.12gb+me": 1})),
     [(E, "mig.too-many-me", (*MD, "2g.12gb+me"), False)]),
    ("+me compute instances sharing one GPU instance",
     config(counts({"2c.3g.40gb+me": 1, "1c.3g.40gb+me": 1})), []),
    ("+me compute instances needing two GPU instances",
     config(counts({"2c.3g.40gb+me": 2})),
     [(E, "mig.too-many-me", (*MD, "2c.3g.40gb+me"), False)]),
    ("one +me and plain profiles", config(counts({"1g.10gb+me": 1, "1g.10gb": 6})), []),
    ("-me and +me.all are not +me", config(counts({"1g.24gb-me": 4, "2g.48gb+me.all": 1})), []),
    ("same GPUs twice", config(disabled(), enabled("all", **{"1g.10gb": 7})),
     [(W, "mig.overlapping-specs", ("mig-configs", "custom", 1, "devices"), False)]),
    ("all, then one index", config(enabled("all", **{"1g.10gb": 7}), disabled([0])),
     [(W, "mig.overlapping-specs", ("mig-configs", "custom", 1, "devices"), False)]),
    ("shared index", config(disabled([0, 1]), disabled([2]), disabled([3, 1])),
     [(W, "mig.overlapping-specs", ("mig-configs", "custom", 2, "devices"), False)]),
    ("disjoint indices", config(disabled([0, 1]), disabled([2, 3])), []),
    ("different filters", config(disabled(**{"device-filter": "0x20B010DE"}),
                                 disabled(**{"device-filter": "0x20B710DE"})), []),
    ("filter and no filter are not certainly the same GPUs",
     config(disabled(), disabled(**{"device-filter": "0x20B710DE"})), []),
    ("same filter, as string and as list",
     config(disabled(**{"device-filter": "0x20B010DE"}),
            disabled(**{"device-filter": ["0x20b010de"]})),
     [(W, "mig.overlapping-specs", ("mig-configs", "custom", 1, "devices"), False)]),
    ("filters matching nothing overlap nothing",
     config(disabled(**{"device-filter": "A100"}), disabled(**{"device-filter": "A100"})),
     [(E, "mig.bad-device-filter", (*S0, "device-filter"), False),
      (E, "mig.bad-device-filter", ("mig-configs", "custom", 1, "device-filter"), False)]),
]  # fmt: skip


@pytest.mark.parametrize(("doc", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule(doc: dict[str, Any], expected: list[Any]) -> None:
    assert summary(spec.check(doc)) == expected


@pytest.mark.parametrize(
    ("name", "warned"),
    [
        ("all-balanced", False),
        ("all-1g.10gb.me", False),
        ("a" * 63, False),
        ("x", False),
        ("custom_1", False),
        ("a" * 64, True),
        ("H100 balanced", True),
        ("-leading-dash", True),
        ("trailing.", True),
        ("all/balanced", True),
        ("", True),
    ],
)
def test_config_names_must_be_label_values(name: str, warned: bool) -> None:
    found = spec.check(config(disabled(), name=name))
    expected = [(W, "mig.config-name-not-label", ("mig-configs", name), True)] if warned else []
    assert summary(found) == expected


UPSTREAM_MESSAGES = [
    (
        config(counts({"1g.10GB": 1})),
        "error validating values in 'mig-devices' field: invalid format for '1g.10GB': "
        "cannot parse fields of '1g.10GB': missing 'gb' from '%dgb'",
    ),
    (
        config(counts({"": 1})),
        "error validating values in 'mig-devices' field: invalid format for '': "
        "profile is the empty string",
    ),
    (
        config(counts({"1g.5gb": 0})),
        "error validating values in 'mig-devices' field: all counts for all MigProfiles are 0",
    ),
    (
        config({"devices": "all", "mig-enabled": True}),
        "missing required field 'mig-devices' when 'mig-enabled' is true",
    ),
    (
        config(disabled(**{"mig-devices": {"1g.5gb": 7}})),
        "MIG devices included when 'mig-enabled' is false",
    ),
]


@pytest.mark.parametrize(("doc", "message"), UPSTREAM_MESSAGES)
def test_upstream_rules_use_mig_parteds_words(doc: dict[str, Any], message: str) -> None:
    assert [f.message for f in spec.check(doc)] == [message]


def test_impossible_profile_says_why_and_what_mig_parted_does() -> None:
    (finding,) = spec.check(config(counts({"5g.50gb": 1})))
    assert finding.message.startswith("'5g.50gb' is not a MIG profile: a GPU instance has")
    assert "mig-parted accepts the name" in finding.message


def test_bad_filter_says_mig_parted_silently_matches_no_gpu() -> None:
    (finding,) = spec.check(config(disabled(**{"device-filter": "A100"})))
    assert "silently matches no GPU" in finding.message
    assert "'A100'" in finding.message


def test_decimal_filter_names_the_hex_form_to_write() -> None:
    (finding,) = spec.check(config(disabled(**{"device-filter": "548409566"})))
    assert finding.hint == "write '0x20B010DE'"


def test_non_canonical_profile_names_the_canonical_form() -> None:
    (finding,) = spec.check(config(counts({"01g.05gb": 7})))
    assert finding.hint == "write '1g.5gb'"
    assert "assert" in finding.message


def test_overlap_names_the_earlier_spec_and_says_the_last_one_wins() -> None:
    (finding,) = spec.check(config(disabled([0, 1]), disabled([2]), disabled([1])))
    assert "spec #1 of 'custom'" in finding.message
    assert "GPU 1" in finding.message
    assert "applies the last one" in finding.message


def test_too_many_me_lists_what_was_asked() -> None:
    (finding,) = spec.check(config(counts({"1g.6gb+me": 1, "2g.12gb+me": 1})))
    assert "2 GPU instances with media extensions" in finding.message
    assert "'1g.6gb+me': 1, '2g.12gb+me': 1" in finding.message


def test_every_finding_of_a_spec_is_reported_together() -> None:
    doc = config(
        {
            "devices": [0, 0],
            "device-filter": "A100",
            "mig-enabled": True,
            "mig-devices": {"1g.10b": 1, "1g.10gb+me": 2},
        }
    )
    codes = sorted(f.code for f in spec.check(doc))
    assert codes == [
        "mig.bad-device-filter",
        "mig.bad-profile-format",
        "mig.duplicate-device",
        "mig.too-many-me",
    ]


@pytest.mark.parametrize(
    "doc",
    [
        {"mig-configs": None},
        {"mig-configs": []},
        {"mig-configs": {"a": None}},
        {"mig-configs": {"a": "all"}},
        {"mig-configs": {"a": [None, 1, "x", []]}},
        {"mig-configs": {1: [{"devices": "all", "mig-enabled": False}]}},
        config({"devices": 3, "mig-enabled": "yes", "mig-devices": []}),
        config({"devices": ["0"], "device-filter": 7, "mig-enabled": False}),
        config({"devices": "all", "mig-enabled": True, "mig-devices": {1: 2, "1g.5gb": "x"}}),
        config({"devices": "all", "mig-enabled": True, "mig-devices": None}),
    ],
)
def test_what_the_schema_reports_is_not_reported_again(doc: dict[str, Any]) -> None:
    assert spec.check(doc) == []


def test_negative_counts_are_left_to_the_schema() -> None:
    # A negative count is the schema's error; "all counts are 0" would be misleading.
    assert spec.check(config(counts({"1g.10gb": -1}))) == []
