"""Joining a node's sources at scale: 20,000 allocations in both the checkpoint and PodResources
end well inside the per-test timeout (each entry used to be compared with every live allocation,
and every allocation with every registered device), with each allocation kept once."""

from __future__ import annotations

from kubectl_gpu.gpumap import join
from kubectl_gpu.gpumap.allocations import Allocation, Source, group_devices

GPU = "GPU-4f2c7e1a-9b3d-4c8e-a1f0-6d5b2e8c9a17"
N = 20_000


def _allocations(source: Source) -> tuple[Allocation, ...]:
    """The checkpoint knows pods by UID only, PodResources by name only."""
    checkpoint = source is Source.CHECKPOINT
    return tuple(
        Allocation(
            f"uid-{i}" if checkpoint else None,
            None if checkpoint else "ns",
            None if checkpoint else f"p{i}",
            "main",
            "nvidia.com/gpu",
            (f"{GPU}::{i}",),
            source,
        )
        for i in range(N)
    )


def test_20k_allocations_in_both_sources_join_once_each() -> None:
    ids = [("nvidia.com/gpu", f"{GPU}::{i}") for i in range(N)]
    registered = group_devices(ids, Source.CHECKPOINT)
    sources = join.NodeSources(
        node="n",
        checkpoint=_allocations(Source.CHECKPOINT),
        registered=registered,
        podresources=_allocations(Source.PODRESOURCES),
        allocatable=group_devices(ids, Source.PODRESOURCES),
    )

    joined = join.make(sources)

    assert len(joined.rows) == N and not joined.findings
    assert {r.pod_uid for r in joined.rows} == {f"uid-{i}" for i in range(N)}
