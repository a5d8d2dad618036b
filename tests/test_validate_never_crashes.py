"""Whatever text a user feeds `validate`, the answer is findings, never a traceback."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubectl_gpu import validation
from kubectl_gpu.findings import Severity

KEYS = st.sampled_from(
    [
        "version",
        "flags",
        "sharing",
        "timeSlicing",
        "mps",
        "resources",
        "name",
        "replicas",
        "rename",
        "devices",
        "migStrategy",
        "mig-configs",
        "mig-enabled",
        "mig-devices",
        "device-filter",
        "kind",
        "data",
        "apiVersion",
        "imex",
        "channelIDs",
        "hooks",
        "1g.10gb",
        "renameByDefault",
        "failRequestsGreaterThanOne",
        "plugin",
        "deviceListStrategy",
    ]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 100),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["v1", "all", "ConfigMap", "nvidia.com/gpu", "mixed", "1g.5gb"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(KEYS, st.text(max_size=8)), inner, max_size=5),
    ),
    max_leaves=25,
)
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_well_formed(report: validation.FileReport) -> None:
    for f in report.findings:
        assert f.severity in (Severity.ERROR, Severity.WARNING)
        assert f.code and f.message and f.file == "f.yaml"
        assert f.line is None or f.line >= 1


@FAST
@given(st.text(max_size=300))
def test_arbitrary_text(text: str) -> None:
    assert_well_formed(validation.validate_text(text, "f.yaml"))


@FAST
@given(VALUES)
def test_arbitrary_yaml_structures(value: Any) -> None:
    assert_well_formed(validation.validate_text(yaml.safe_dump(value), "f.yaml"))


@FAST
@given(
    st.dictionaries(st.text(alphabet="abcdefgh-_.:/ ", min_size=0, max_size=70), VALUES, max_size=3)
)
def test_arbitrary_configmaps(data: dict[str, Any]) -> None:
    values = {k: yaml.safe_dump(v) if not isinstance(v, str) else v for k, v in data.items()}
    doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": values}
    assert_well_formed(validation.validate_text(yaml.safe_dump(doc), "f.yaml"))
