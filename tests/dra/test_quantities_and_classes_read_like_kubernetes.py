"""Quantities as Kubernetes reads them (the MPS pinned-memory limits) and the device type a
DeviceClass selects, from the NVIDIA chart's class names or a class's own CEL selector."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kubectl_gpu.dra import classes, quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("10Gi", 10 * 1024**3),
        ("512Mi", 512 * 1024**2),
        ("1G", 10**9),
        ("1e9", 10**9),
        ("1.5Gi", 3 * 1024**3 // 2),
        (1073741824, 1073741824),
        ("500m", Fraction(1, 2)),
    ],
)
def test_quantities_parse_exactly(text: object, value: object) -> None:
    assert quantity.parse(text) == value


@pytest.mark.parametrize("text", ["10 gigabytes", "Gi", "10GB", "", True, "1.2.3"])
def test_non_quantities_are_refused(text: object) -> None:
    assert quantity.parse(text) is None


def test_mps_limits_round_down_to_whole_mebibytes_like_the_driver() -> None:
    assert quantity.whole_mebibytes(Fraction(1024**2)) == 1
    assert quantity.whole_mebibytes(Fraction(1024**2 - 1)) == 0
    assert quantity.whole_mebibytes(Fraction(3 * 1024**3 // 2)) == 1536


def test_chart_classes_and_own_classes_name_their_device_type() -> None:
    mine = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "big-mig"},
        "spec": {
            "selectors": [
                {"cel": {"expression": 'device.attributes["gpu.nvidia.com"].type == "mig"'}}
            ]
        },
    }
    found = classes.catalogue([mine, {"kind": "ConfigMap"}])
    assert found["gpu.nvidia.com"] == "gpu"
    assert found["mig.nvidia.com"] == "mig"
    assert found["big-mig"] == "mig"


def test_a_selector_comparing_two_types_names_none() -> None:
    either = "device.attributes['gpu.nvidia.com'].type == 'gpu' || " + (
        "device.attributes['gpu.nvidia.com'].type == 'mig'"
    )
    assert classes.from_expressions([either]) is None


@pytest.mark.parametrize("text", [float("inf"), float("nan"), "1e99999999"])
def test_infinite_or_absurd_quantities_are_refused_not_computed(text: object) -> None:
    assert quantity.parse(text) is None
