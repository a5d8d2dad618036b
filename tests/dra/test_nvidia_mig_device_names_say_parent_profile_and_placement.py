"""NVIDIA's DRA driver names a MIG device `gpu-<minor>-mig-<profile>-<profile ID>-<placement
start>` (docs/upstream-facts.md N5.2): the name is read back into those three numbers, and any
other name (a whole GPU, a stand-in's numbering) is not taken for one."""

from __future__ import annotations

import pytest

from kubectl_gpu.dra.devicenames import MigDeviceName, parse_mig


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("gpu-0-mig-1g10gb-19-3", MigDeviceName(0, 19, 3)),
        ("gpu-1-mig-3g40gb-9-4", MigDeviceName(1, 9, 4)),
        ("gpu-12-mig-1g10gb-me-20-6", MigDeviceName(12, 20, 6)),  # 1g.10gb+me
        ("gpu-0", None),
        ("gpu-0-mig-1g10gb-0", None),  # no profile ID: not NVIDIA's name
        ("gpu-0-mig-1g10gb-19-3-extra", None),
    ],
)
def test_a_canonical_mig_name_is_read_back(name: str, parsed: MigDeviceName | None) -> None:
    assert parse_mig(name) == parsed
