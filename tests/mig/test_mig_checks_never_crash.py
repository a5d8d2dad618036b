"""Whatever data reaches the MIG checks, they answer with findings or ProfileError, never crash."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubectl_gpu.findings import Finding
from kubectl_gpu.mig import companions, profiles, spec
from kubectl_gpu.mig.profiles import ProfileError

FAST = settings(
    max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
NAME_ALPHABET = "0123456789cgbme.+-, \t_xGB\u0661\u00a0"
PROFILE_NAMES = st.one_of(
    st.text(max_size=20),
    st.text(alphabet=NAME_ALPHABET, max_size=16),
    st.sampled_from(["1g.10gb", "1c.3g.40gb", "1g.10gb+me", "1g.24gb-me", "7c.7g.80gb", ""]),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 10),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=10),
    st.sampled_from(["all", "v1", "0x20B010DE", "0x20B010DE:0x145F10DE", "548409566", ""]),
)
ANY = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(max_size=6), SCALARS),
                                                     inner, max_size=4)
    ),
    max_leaves=20,
)  # fmt: skip
SPEC = st.dictionaries(
    st.sampled_from(["devices", "device-filter", "mig-enabled", "mig-devices", "other"]),
    st.one_of(ANY, st.dictionaries(PROFILE_NAMES, st.one_of(st.integers(-2, 9), ANY), max_size=4)),
    max_size=5,
)
CONFIG_DOCS = st.fixed_dictionaries(
    {"version": SCALARS},
    optional={
        "mig-configs": st.one_of(
            ANY, st.dictionaries(st.text(max_size=70), st.one_of(ANY, st.lists(SPEC, max_size=4)))
        )
    },
)


@FAST
@given(PROFILE_NAMES)
def test_parse_raises_only_profile_error_and_round_trips(name: str) -> None:
    try:
        profile = profiles.parse(name)
    except ProfileError as e:
        assert e.profile == name and e.message
        return
    assert profiles.parse(profile.name) == profile


@FAST
@given(st.one_of(CONFIG_DOCS, ANY))
def test_check_never_raises(doc: Any) -> None:
    found = spec.check(doc)
    assert all(isinstance(f, Finding) and f.code.startswith("mig.") for f in found)


@FAST
@given(st.one_of(CONFIG_DOCS, ANY))
def test_from_dict_raises_only_config_error(doc: Any) -> None:
    from kubectl_gpu.errors import ConfigError

    try:
        spec.MigConfigFile.from_dict(doc)
    except ConfigError:
        pass


@settings(FAST, max_examples=100)
@given(ANY)
def test_companion_checks_never_raise(doc: Any) -> None:
    for data in (doc, {"hooks": doc}, {"hooks": {"apply-start": [{"envs": doc}]}},
                 {"systemd-services": doc}):  # fmt: skip
        assert all(isinstance(f, Finding) for f in companions.check_hooks(data))
        assert all(isinstance(f, Finding) for f in companions.check_gpu_clients(data))
