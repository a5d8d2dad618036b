"""Which key a node reads: config-manager's label, default and fallbacks (docs/upstream-facts.md
P3.2)."""

from __future__ import annotations

import pytest

from kubectl_gpu import keys
from kubectl_gpu.sharing import rollout

LABEL = keys.DEVICE_PLUGIN_CONFIG_LABEL


@pytest.mark.parametrize(
    ("labels", "available", "default", "fallbacks", "expected"),
    [
        ({LABEL: "a"}, {"a", "b"}, "b", ("named",), ("a", "label", "")),
        ({LABEL: "x"}, {"a"}, "a", ("named",), ("x", "label", "specified config x does not exist")),
        ({}, {"a", "b"}, "b", ("named",), ("b", "default", "")),
        (
            {},
            {"a"},
            "gone",
            ("empty",),
            ("gone", "default", "specified config gone does not exist"),
        ),
        ({}, {"default", "b"}, "", ("named", "single"), ("default", "named", "")),
        ({}, {"only"}, "", ("named", "single"), ("only", "single", "")),
        ({}, {"a", "b"}, "", ("empty",), ("", "empty", "")),
        (
            {},
            {"a", "b"},
            "",
            ("named", "single"),
            ("", "none", "no config was set, no default was provided, and all fallbacks failed"),
        ),
        ({}, set(), "", ("empty",), ("", "none", "no configuration files available")),
    ],
)
def test_selection(
    labels: dict[str, str],
    available: set[str],
    default: str,
    fallbacks: tuple[str, ...],
    expected: tuple[str, str, str],
) -> None:
    chosen = rollout.select(labels, available, default, fallbacks)
    assert (chosen.key, chosen.how, chosen.error) == expected
