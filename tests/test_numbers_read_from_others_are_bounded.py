"""Numbers read from labels, quantities and annotations others wrote are bounded: digits that
are not ASCII or more than 18 of them read as no number, never as a crash (Python's int()
refuses 4,300 digits and takes quadratic time below that)."""

from __future__ import annotations

import pytest

from kubectl_gpu import numbers
from kubectl_gpu.mig import apply
from kubectl_gpu.sharing.rollout.nodes import GpuNode


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("4", 4),
        (" 12 ", 12),
        (7, 7),
        ("9" * 18, 10**18 - 1),
        ("9" * 19, None),
        ("9" * 5000, None),
        ("²", None),
        ("٣", None),  # an Arabic-Indic digit: isdigit() says yes, Kubernetes does not
        ("-1", None),
        ("", None),
        (True, None),
        (-3, None),
        (None, None),
    ],
)
def test_whole_reads_only_plain_bounded_digits(text: object, value: int | None) -> None:
    assert numbers.whole(text) == value


def test_hostile_gfd_labels_read_as_unknown() -> None:
    node = GpuNode.from_dict(
        {
            "metadata": {
                "name": "gpu-a",
                "labels": {
                    "nvidia.com/gpu.count": "9" * 5000,
                    "nvidia.com/cuda.compute.major": "²",
                    "nvidia.com/cuda.compute.minor": "0",
                },
            },
            "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "²"}},
        }
    )

    assert node.physical("nvidia.com/gpu") is None
    assert node.compute_capability is None


def test_a_hostile_allocatable_reads_as_missing_for_the_agent() -> None:
    missing = apply.expected_resources(
        {"nvidia.com/mig-1g.10gb": 2}, {"nvidia.com/mig-1g.10gb": "9" * 5000}
    )

    assert missing == {"nvidia.com/mig-1g.10gb": (2, 0)}
