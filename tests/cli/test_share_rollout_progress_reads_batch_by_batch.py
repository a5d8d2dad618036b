"""A rollout in `--max-unavailable` batches says where it stands on stderr: batch n of m, how
many nodes are done of all, and what the batch waits for, so that a fleet's rollout (5,000
nodes in 50 batches) reads as more than node names going by. `-o json` stays the document.

Five GPU nodes of one model (L4) of the Helm layout on the real control plane, two at a time:
three batches. The first node proves the config for its model (its pod stays Ready for the
steady check) before any other starts; after it a node starts as soon as another's new pod is
Ready (at most two without a Ready plugin), their steady checks going on beside, as Kubernetes'
own DaemonSet rollout moves on once pods are available.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest

from tests.cli import clirequests
from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

Run = Callable[..., CliResult]
pytestmark = pytest.mark.timeout(180)  # five nodes' plugin pods restarted by real controllers
PLAIN = "version: v1\nflags:\n  migStrategy: none\n"
NODES = [NodeSpec(f"gpu-{i}", "L4", 1) for i in range(5)]


@pytest.fixture
def cluster(sim_cluster: MakeSimCluster) -> SimCluster:
    return sim_cluster(NODES, "helm", {"any": PLAIN}, "any")


def test_each_batch_says_its_number_the_nodes_done_and_what_it_waits_for(
    run_cli: Run, cluster: SimCluster
) -> None:
    result = run_cli(
        "--kubeconfig", str(cluster.kubeconfig), "share", "--replicas", "2",
        "--max-unavailable", "2", "-o", "json",
    )  # fmt: skip

    assert result.exit_code == 0, result.stderr
    assert [r["result"] for r in json.loads(result.stdout)["nodes"]] == ["restarted"] * 5
    lines = result.stderr.splitlines()
    begun = [line for line in lines if re.match(r"batch \d of 3: restarting", line)]
    assert begun[:2] == [
        "batch 1 of 3: restarting the device plugin on 2 nodes (gpu-0, gpu-1) (0 of 5 nodes done)",
        "batch 2 of 3: restarting the device plugin on 2 nodes (gpu-2, gpu-3) (0 of 5 nodes done)",
    ]  # the second begins with gpu-2 beside gpu-1, before the first batch ended
    assert re.fullmatch(
        r"batch 3 of 3: restarting the device plugin on 1 node \(gpu-4\) \([02] of 5 nodes done\)",
        begun[2],
    ), begun
    ended = [re.sub(r" \(\d+s\)$", "", line) for line in lines if " ended: " in line]
    assert ended == [
        "batch 1 of 3 ended: 2 of 5 nodes done",
        "batch 2 of 3 ended: 4 of 5 nodes done",
        "batch 3 of 3 ended: 5 of 5 nodes done",
    ]
    lines = [re.sub(r" \(\d+s\)$", "", line) for line in lines]  # seconds since the start
    waits = [line for line in lines if ": waiting for " in line]
    # the proof, gpu-0, is waited for alone: Ready, then its steady check, before any other
    # node starts (the first wait may be skipped when its pod was Ready at the first look)
    proof = [
        "batch 1 of 3: waiting for a new device plugin pod to be Running and Ready on 1 node "
        "(gpu-0)",
        "batch 1 of 3: waiting for the new device plugin pods to stay Ready on 1 node (gpu-0)",
    ]
    steady = lines.index(proof[1])
    assert [w for w in waits if lines.index(w) <= steady] in (proof, proof[1:]), waits
    assert steady < lines.index(begun[1])
    # (which nodes it names depends on how far the others are: up to four may be open)
    assert any(w.startswith("batch 3 of 3: waiting for") for w in waits), waits
    # after the proof, the batches overlap and end in order
    order = [i for i, line in enumerate(lines) if line in begun or " ended: " in line]
    assert [re.sub(r"( ended)?: .*", r"\1", lines[i]) for i in order][:2] == [
        "batch 1 of 3", "batch 2 of 3",
    ]  # fmt: skip


def test_a_rollout_reads_each_collection_once_and_makes_no_request_per_look(
    run_cli: Run, cluster: SimCluster
) -> None:
    """Five nodes in one batch. Before the first delete: the nodes and the agents' reports are
    read once (the plan and the preview of pods hit share them), every pod once for the
    preview, and the plugin's namespace once for the rollout, which also tells which pod each
    node had (at 5,000 nodes each LIST read twice cost seconds, docs/performance.md). After
    it: one watch of that namespace and no LIST at all, however many nodes wait and however
    long (before: one LIST per look; earlier still, one per node and look)."""
    start = clirequests.mark(cluster)
    result = run_cli(
        "--kubeconfig", str(cluster.kubeconfig), "share", "--replicas", "2",
        "--max-unavailable", "5", "-o", "json",
    )  # fmt: skip

    assert result.exit_code == 0, result.stderr
    assert [r["result"] for r in json.loads(result.stdout)["nodes"]] == ["restarted"] * 5
    sent = clirequests.since(cluster, start)
    deletes = [r for r in sent if r.startswith("delete ") and "/pods/" in r]
    gfd = [r for r in deletes if "gpu-feature-discovery" in r]
    assert (len(deletes) - len(gfd), len(gfd)) == (5, 5)  # each plugin and its GFD companion
    first_delete = sent.index(deletes[0])
    lists = [r.split("?")[0] for r in sent[:first_delete] if r.startswith("list ")]
    assert lists.count("list /api/v1/nodes") == 1, lists
    assert len([r for r in lists if "gpunodereports" in r]) <= 1, lists
    assert lists.count("list /api/v1/pods") == 1, lists  # the preview: pods hit
    namespaced = [r for r in lists if r.startswith("list /api/v1/namespaces/") and "/pods" in r]
    assert len(namespaced) == 1, lists  # the rollout's, before its watch
    after = sent[first_delete:]
    assert [r for r in after if r.startswith("list ") and "/pods?" in r] == []
    watches = [r for r in sent if r.startswith("watch ") and "/pods?" in r]
    assert 1 <= len(watches) <= 2, watches  # a second only if the server ended the first
    assert all("/namespaces/" in w for w in watches)  # the plugin's namespace, not the cluster


def test_a_preview_says_once_what_many_nodes_have_in_common(
    run_cli: Run, cluster: SimCluster
) -> None:
    """Five nodes that change alike are one line of the preview, and one of what each pod is
    left (a 5,000-node change was 10,000 lines before its first restart)."""
    result = run_cli(
        "--kubeconfig", str(cluster.kubeconfig), "share", "--replicas", "2", "--dry-run=client"
    )  # fmt: skip

    assert result.exit_code == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if "gpu-" in line]
    nodes = "5 nodes (gpu-0, gpu-1, gpu-2 and 2 more)"
    assert said == [
        f"{nodes}: nvidia.com/gpu 1 → 2",
        f"{nodes}: per pod: time-slicing: no isolation; up to 2 pods share each GPU's memory, "
        "and any of them can take all of it (kubectl gpu top shows who holds what)",
    ]
