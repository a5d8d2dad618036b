"""MIG profile names parse the way mig-parted reads them, and impossible ones are refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubectl_gpu.mig import profiles
from kubectl_gpu.mig.profiles import MigProfile, ProfileError

DATA = Path(__file__).resolve().parent.parent / "data" / "mig"
NVIDIA_DEFAULT = DATA / "mig-parted__deployments__systemd__config-default.yaml"


def _default_profile_names() -> list[str]:
    doc = yaml.safe_load(NVIDIA_DEFAULT.read_text())
    names = {
        name
        for specs in doc["mig-configs"].values()
        for spec in specs
        for name in (spec.get("mig-devices") or {})
    }
    return sorted(names)


def test_nvidia_default_config_names_many_profiles() -> None:
    # Guards the parametrisation below against an empty or truncated fixture.
    assert len(_default_profile_names()) > 60


@pytest.mark.parametrize("name", _default_profile_names())
def test_every_profile_in_nvidias_default_config_parses_to_itself(name: str) -> None:
    assert profiles.parse(name).name == name


@pytest.mark.parametrize(
    ("name", "c", "g", "gb", "attributes", "negative"),
    [
        ("1g.5gb", 1, 1, 5, (), ()),
        ("7g.80gb", 7, 7, 80, (), ()),
        ("3g.40gb", 3, 3, 40, (), ()),
        ("1c.3g.40gb", 1, 3, 40, (), ()),
        ("2c.3g.20gb", 2, 3, 20, (), ()),
        ("4c.7g.80gb", 4, 7, 80, (), ()),
        ("1g.10gb+me", 1, 1, 10, ("me",), ()),
        ("2g.12gb+me", 2, 2, 12, ("me",), ()),
        ("2g.48gb+me.all", 2, 2, 48, ("me.all",), ()),
        ("1g.24gb+gfx", 1, 1, 24, ("gfx",), ()),
        ("1g.24gb-me", 1, 1, 24, (), ("me",)),
        ("7g.269gb", 7, 7, 269, (), ()),
    ],
)
def test_fields_and_attributes_are_read(
    name: str, c: int, g: int, gb: int, attributes: tuple[str, ...], negative: tuple[str, ...]
) -> None:
    assert profiles.parse(name) == MigProfile(c, g, gb, attributes, negative)


@pytest.mark.parametrize(
    ("name", "base", "resource"),
    [
        # NVIDIA's plugin v0.19.3 matches a device's profile unanchored against its resource
        # patterns, the plain profile of a size first (docs/upstream-facts.md P4)
        ("1g.10gb", "1g.10gb", "nvidia.com/mig-1g.10gb"),
        ("1g.10gb+me", "1g.10gb", "nvidia.com/mig-1g.10gb"),
        ("2g.48gb+me.all", "2g.48gb", "nvidia.com/mig-2g.48gb"),
        ("1g.24gb-me", "1g.24gb", "nvidia.com/mig-1g.24gb"),
        ("1c.3g.40gb", "1c.3g.40gb", "nvidia.com/mig-3g.40gb"),
    ],
)
def test_base_name_and_device_plugin_resource_name(name: str, base: str, resource: str) -> None:
    profile = profiles.parse(name)
    assert (profile.base, profile.resource_name) == (base, resource)


@pytest.mark.parametrize(
    ("written", "canonical"),
    [("7c.7g.80gb", "7g.80gb"), ("01g.05gb", "1g.5gb"), ("3c.3g.40gb+me", "3g.40gb+me")],
)
def test_names_are_rendered_the_way_nvml_names_instances(written: str, canonical: str) -> None:
    assert profiles.parse(written).name == canonical
    assert str(profiles.parse(written)) == canonical


def test_a_compute_instance_profile_knows_its_gpu_instance() -> None:
    profile = profiles.parse("1c.3g.40gb")
    assert profile.is_compute_instance
    assert profile.gpu_instance == profiles.parse("3g.40gb")
    assert not profiles.parse("3g.40gb").is_compute_instance


def test_only_plus_me_counts_as_holding_the_media_engines() -> None:
    assert profiles.parse("1g.10gb+me").has_media_extensions
    assert not profiles.parse("1g.24gb-me").has_media_extensions
    assert not profiles.parse("2g.48gb+me.all").has_media_extensions


def test_profiles_are_frozen_values_usable_as_keys() -> None:
    counts = {profiles.parse("1g.10gb"): 2}
    counts[profiles.parse("1g.10gb")] += 1
    assert counts == {MigProfile(1, 1, 10): 3}
    with pytest.raises(AttributeError):
        profiles.parse("1g.10gb").memory_gb = 20  # type: ignore[misc]


# mig-parted's own messages (go-nvlib parseMigProfile), word for word.
UPSTREAM_ERRORS = [
    ("", "profile is the empty string"),
    ("1g.10gb+me-x", "profile '1g.10gb+me-x' contains both '+/-' attributes"),
    ("1g", "cannot parse fields of '1g': parsed wrong number of fields, expected 2 or 3"),
    ("1c.1g.5gb.x", "cannot parse fields of '1c.1g.5gb.x': missing 'gb' from '%dgb'"),
    ("1g.10GB", "cannot parse fields of '1g.10GB': missing 'gb' from '%dgb'"),
    ("1x.10gb", "cannot parse fields of '1x.10gb': missing 'g' from '%dg'"),
    ("1g.1g.10gb", "cannot parse fields of '1g.1g.10gb': missing 'c' from '%dc'"),
    ("xg.10gb", "cannot parse fields of 'xg.10gb': malformed number in '%dg'"),
    ("1g.gb", "cannot parse fields of '1g.gb': malformed number in '%dgb'"),
    ("1g.1_0gb", "cannot parse fields of '1g.1_0gb': malformed number in '%dgb'"),
    ("1g.\u0661gb", "cannot parse fields of '1g.\u0661gb': malformed number in '%dgb'"),
    ("1g.99999999999999999999gb",
     "cannot parse fields of '1g.99999999999999999999gb': malformed number in '%dgb'"),
    (" 1g.10gb", "cannot parse fields of ' 1g.10gb': leading or trailing spaces on '%dg'"),
    ("1g.10gb ", "cannot parse fields of '1g.10gb ': leading or trailing spaces on '%dgb'"),
    ("1g.-10gb", "cannot parse fields of '1g.-10gb': missing 'gb' from '%dgb'"),
    ("1g.10gb+", "cannot parse attributes of '1g.10gb+': empty attribute in list"),
    ("1g.10gb+me,,gfx", "cannot parse attributes of '1g.10gb+me,,gfx': empty attribute in list"),
    ("1g.10gb+me,me", "cannot parse attributes of '1g.10gb+me,me': non unique attribute in list"),
    ("1g.10gb+ me", "cannot parse attributes of '1g.10gb+ me': leading or trailing spaces in "
     "attribute"),
    ("1g.10gb+2me", "cannot parse attributes of '1g.10gb+2me': attribute begins with a number"),
    ("1g.10gb+.me", "cannot parse attributes of '1g.10gb+.me': attribute begins/ends with a dot"),
    ("1g.10gb+me.", "cannot parse attributes of '1g.10gb+me.': attribute begins/ends with a dot"),
    ("1g.10gb+m_e", "cannot parse attributes of '1g.10gb+m_e': non alpha-numeric character or "
     "digit in attribute"),
    ("1g.10gb-m\u00e9", "cannot parse attributes of '1g.10gb-m\u00e9': non alpha-numeric "
     "character or digit in attribute"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "message"), UPSTREAM_ERRORS)
def test_names_mig_parted_rejects_fail_with_its_own_words(name: str, message: str) -> None:
    with pytest.raises(ProfileError) as caught:
        profiles.parse(name)
    assert str(caught.value) == message
    assert caught.value.upstream
    assert caught.value.profile == name


# Names mig-parted's parser accepts but that no GPU offers (docs/upstream-facts.md M4.3).
IMPOSSIBLE = [
    ("5g.50gb", "a GPU instance has 1, 2, 3, 4 or 7 slices, not 5 (5g)"),
    ("8g.96gb", "a GPU instance has 1, 2, 3, 4 or 7 slices, not 8 (8g)"),
    ("0g.5gb", "a GPU instance has 1, 2, 3, 4 or 7 slices, not 0 (0g)"),
    ("3c.2g.20gb", "a compute instance cannot have more slices (3c) than its GPU instance (2g)"),
    ("3c.4g.40gb", "a 4g GPU instance offers compute instances of 1, 2 or 4 slices, not 3c"),
    ("5c.7g.80gb", "a 7g GPU instance offers compute instances of 1, 2, 3, 4 or 7 slices, not 5c"),
    ("0c.1g.5gb", "a 1g GPU instance offers compute instances of 1 slices, not 0c"),
    ("1g.0gb", "memory must be at least 1gb"),
    ("1g.10gb+foo", "unknown attribute '+foo' (known: +me, +me.all, +gfx)"),
    ("1g.24gb-gfx", "unknown attribute '-gfx' (known: -me)"),
    ("1g.24gb+me,gfx", "no MIG profile has more than one attribute (+me, +gfx)"),
]


@pytest.mark.parametrize(("name", "problem"), IMPOSSIBLE)
def test_names_no_gpu_offers_are_refused_with_the_reason(name: str, problem: str) -> None:
    with pytest.raises(ProfileError) as caught:
        profiles.parse(name)
    assert str(caught.value) == f"'{name}' is not a MIG profile: {problem}"
    assert not caught.value.upstream


@pytest.mark.parametrize(("g", "allowed"), [(7, {1, 2, 3, 4, 7}), (4, {1, 2, 4}), (3, {1, 2, 3}),
                                            (2, {1, 2}), (1, {1})])  # fmt: skip
def test_compute_instance_sizes_per_gpu_instance_size(g: int, allowed: set[int]) -> None:
    accepted = set()
    for c in range(0, 9):
        try:
            profiles.parse(f"{c}c.{g}g.{10 * g}gb")
            accepted.add(c)
        except ProfileError:
            pass
    assert accepted == allowed


def test_profile_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        profiles.parse("nonsense")
