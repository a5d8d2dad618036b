"""The AGE column reads like kubectl's (apimachinery's HumanDuration): seconds up to two
minutes, minutes and seconds up to ten, hours and minutes up to eight hours, days after two."""

from __future__ import annotations

import pytest

from kubectl_gpu.cli import durations


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0s"),
        (119, "119s"),
        (150, "2m30s"),
        (300, "5m"),
        (45 * 60, "45m"),
        (3 * 3600 + 20 * 60, "3h20m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 5 * 3600, "3d5h"),
        (40 * 86400, "40d"),
        (3 * 365 * 86400 + 10 * 86400, "3y10d"),
        (None, None),
    ],
)
def test_ages_read_like_kubectl(seconds: float | None, shown: str | None) -> None:
    assert durations.human(seconds) == shown
