"""`kubectl gpu doctor POD` for a pod on a node reads that node's pods, not the cluster's: a
single-pod diagnosis on a 5,000-node cluster must not list 40,000 pods (docs/performance.md).
And `doctor` (the cluster view) has the server leave out pods that ended.

Counted from the real kube-apiserver's audit log: every request the CLI sent.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import unquote

import pytest

from tests.cli import clirequests
from tests.cli.doctorpods import gpu_pod, run_pods
from tests.conftest import CliResult
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

Run = Callable[..., CliResult]
pytestmark = pytest.mark.timeout(180)
PLAIN = "version: v1\nflags:\n  migStrategy: none\n"


@pytest.fixture
def cluster(sim_cluster: MakeSimCluster) -> SimCluster:
    nodes = [NodeSpec(f"gpu-{c}", "L4", 2) for c in "abc"]
    made = sim_cluster(nodes, "helm", {"any": PLAIN}, "any")
    here, there = gpu_pod("train"), gpu_pod("other", "2")
    here["spec"]["nodeName"], there["spec"]["nodeName"] = "gpu-a", "gpu-b"
    run_pods(made, here, there)
    return made


def _pod_lists(sent: list[str]) -> list[str]:
    return [unquote(r) for r in sent if r.startswith(("list ", "watch ")) and "/pods" in r]


def test_doctor_of_a_pod_on_a_node_lists_only_that_nodes_pods(
    run_cli: Run, cluster: SimCluster
) -> None:
    start = clirequests.mark(cluster)
    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "doctor", "train", "-o", "json")

    assert result.exit_code == 0, result.stderr
    [healthy] = [d for d in result.json["diagnoses"] if d["severity"] == "info"]
    assert healthy["message"] == (
        "no GPU problem found: the pod is Running on node gpu-a with 1 nvidia.com/gpu"
    )
    sent = [unquote(r) for r in clirequests.since(cluster, start)]
    pod_lists = _pod_lists(sent)
    assert pod_lists, sent  # its node's pods and its plugin were read
    assert all("fieldSelector=spec.nodeName=gpu-a" in r for r in pod_lists), pod_lists
    assert not [r for r in sent if r.startswith("list /api/v1/nodes")], sent  # a GET of gpu-a
    assert "get /api/v1/nodes/gpu-a" in sent
    assert not [r for r in sent if r.startswith("list ") and "gpunodereports" in r], sent


def test_doctor_of_the_cluster_has_the_server_leave_out_ended_pods(
    run_cli: Run, cluster: SimCluster
) -> None:
    start = clirequests.mark(cluster)
    result = run_cli("--kubeconfig", str(cluster.kubeconfig), "doctor", "-o", "json")

    assert result.exit_code in (0, 1), result.stderr
    every = [r for r in _pod_lists(clirequests.since(cluster, start)) if "/namespaces/" not in r]
    assert every, "the cluster view reads the pods that hold GPUs"
    assert all("status.phase!=Succeeded,status.phase!=Failed" in r for r in every), every
