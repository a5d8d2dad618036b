"""`mig apply --drain --max-unavailable 2` on two nodes: one batch of two, each node with its
own agent process over its own GPUs and a ReplicaSet's pods under a PodDisruptionBudget. Every
pod is evicted through the Eviction API (none deleted, none refused), every node ends with the
layout applied, uncordoned, no drain record, and NVIDIA's plugin advertising the MIG devices;
no request was made per node to find the agents' pods.

This is `benchmarks/mig_drain.py` at its smallest (the fleet benchmark of docs/performance.md),
run as a test so that what it measures stays true: the other drain tests take one node at a
time."""

from __future__ import annotations

import pytest

from benchmarks import mig_drain
from tests.kit.node import sandbox

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(sandbox.unavailable() is not None, reason=str(sandbox.unavailable())),
]


def test_two_nodes_in_one_batch_are_drained_changed_and_given_back() -> None:
    result = mig_drain.measure(nodes=2, gpus=1, max_unavailable=2)

    assert result.exit == 0, result.lines
    assert [row["result"] for row in result.rows] == ["success", "success"]
    assert result.evictions == {201: 2}  # each node's pod, through the Eviction API
    assert "delete pods" not in result.calls  # never deleted directly
    # the agents' pods read with one LIST for all nodes, not one LIST per node
    assert "one node" not in result.pod_lists, result.pod_lists
    # requests per node stay constant however long the agents take: the wait follows the
    # nodes with one watch (no GET of each node per poll), each drain step is one PATCH with
    # its record (cordon and record together, uncordon and its removal together), and a
    # node's record is read once
    assert result.calls["watch nodes"] >= 1, result.calls
    assert result.calls["get nodes"] <= 2 * 2, result.calls
    assert result.calls["patch nodes"] <= 5 * 2, result.calls
    assert [e.name for e in result.ends if e.done(gpus=1)] == ["gpu-0000", "gpu-0001"]
    assert result.ends[0].allocatable == {
        "nvidia.com/gpu": 0,
        "nvidia.com/mig-1g.10gb": 2,
        "nvidia.com/mig-2g.20gb": 1,
        "nvidia.com/mig-3g.40gb": 1,
    }
    batches = [line for _, line in result.lines if line.startswith("batch ")]
    assert batches[0] == (
        "batch 1 of 1: draining and changing the MIG layout on 2 nodes (gpu-0000, gpu-0001) "
        "(0 of 2 nodes done)"
    )
    assert batches[-1].startswith("batch 1 of 1 ended: 2 of 2 nodes done")
