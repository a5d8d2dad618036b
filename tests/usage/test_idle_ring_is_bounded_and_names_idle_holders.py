"""The agent's ring of samples per held device stays bounded, forgets released devices, reads
back from its document, and `idle` names only holders watched over the whole window that
used nothing (no SM; on MIG, no memory)."""

from __future__ import annotations

import pytest

from kubectl_gpu.usage import samples
from kubectl_gpu.usage.document import UsageDocumentError
from kubectl_gpu.usage.samples import Holder, Ring, Sample

LAZY = Holder("GPU-a::0", "default", "lazy", "u1", "main")
BUSY = Holder("GPU-a::1", "default", "busy", "u2", "main")
MIG = Holder("MIG-x", "default", "mig", "u3", "main")


def filled(minutes: int) -> Ring:
    ring = Ring(60)
    for i in range(minutes):
        ring.add(
            [
                (LAZY, Sample(i * 60.0, 2**30, 0)),
                (BUSY, Sample(i * 60.0, 0, 5 if i == minutes - 3 else 0)),
                (MIG, Sample(i * 60.0, 2**20 if i == 1 else 0, None, "mig")),
            ]
        )
    return ring


def test_only_holders_that_used_nothing_over_the_window_are_idle() -> None:
    ring = filled(45)
    found = samples.idle(ring.items(), now=44 * 60.0, window=30 * 60)
    assert {i.holder.pod: i.sm_known for i in found} == {"lazy": True, "mig": False}


def test_mig_memory_early_in_the_ring_counts_only_inside_the_window() -> None:
    found = samples.idle(filled(45).items(), now=44 * 60.0, window=44 * 60)
    assert {i.holder.pod for i in found} == {"lazy"}


def test_a_window_longer_than_what_was_watched_names_nobody() -> None:
    assert samples.idle(filled(20).items(), now=19 * 60.0, window=30 * 60) == []


def test_the_ring_keeps_its_capacity_and_forgets_released_devices() -> None:
    ring = Ring(5)
    for i in range(50):
        ring.add([(LAZY, Sample(float(i), 0, 0))])
    [(holder, kept)] = ring.items()
    assert holder == LAZY and [s.at for s in kept] == [45.0, 46.0, 47.0, 48.0, 49.0]
    ring.add([(BUSY, Sample(50.0, 0, 0))])
    assert [h for h, _ in ring.items()] == [BUSY]


def test_the_ring_tracks_at_most_max_devices() -> None:
    ring = Ring(1)
    ring.add(
        [
            (Holder(f"d{i}", None, None, None, None), Sample(0, 0, 0))
            for i in range(samples.MAX_DEVICES + 50)
        ]
    )
    assert len(ring.items()) == samples.MAX_DEVICES
    assert Ring(10**9).capacity == samples.MAX_SAMPLES


def test_the_document_reads_back_and_refuses_other_shapes() -> None:
    ring = filled(3)
    doc = samples.to_dict("n1", "2026-11-28T00:00:00Z", 60, ring)
    assert samples.from_dict(doc) == ring.items()
    with pytest.raises(UsageDocumentError):
        samples.from_dict({**doc, "kind": "GPUUsage"})
    with pytest.raises(UsageDocumentError):
        samples.from_dict({**doc, "devices": [{"deviceID": "x", "samples": [["t"]]}]})
