"""A `mig apply` interrupted at any request of its run, before the request is sent or after
the server applied a write whose answer was lost, says whether it asked the node (read back
from the node's label, not from where the code was) and exits 128 + the signal."""

from __future__ import annotations

import dataclasses
import json
import signal

import pytest

from kubectl_gpu import cluster, errors, keys
from kubectl_gpu.workflows.mig import apply as mig_apply
from kubectl_gpu.workflows.mig.request import ApplyRequest
from kubectl_gpu.workflows.mig.targets import Scope
from tests.agent.fixtures import agent_pod
from tests.kit.cluster import SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.kube import layouts
from tests.workflows.test_share_interrupted_at_any_moment_says_what_it_wrote import Interrupting

ALL_3G = {"version": "v1", "mig-configs": {"all-3g": [
    {"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}
]}}  # fmt: skip


@pytest.fixture
def node(sim_cluster: MakeSimCluster) -> SimCluster:
    cluster = sim_cluster(["gpu-1=A100-SXM4-80GB:1"], layouts.helm(env={"MIG_STRATEGY": "mixed"}))
    agent_pod(cluster, "gpu-1")
    return cluster


@pytest.mark.parametrize("after", [False, True], ids=["before-sending", "answer-lost"])
@pytest.mark.parametrize("at", range(1, 20))
def test_an_interruption_at_any_request_tells_the_truth(
    node: SimCluster, at: int, after: bool
) -> None:
    api = cluster.connect(str(node.kubeconfig))
    fields = {f.name: getattr(api, f.name) for f in dataclasses.fields(cluster.Api)}
    stopping = Interrupting(**fields, at=at, after=after, signum=signal.SIGINT)
    request = ApplyRequest("mig.yaml", json.loads(json.dumps(ALL_3G)), "all-3g", Scope(("gpu-1",)))

    try:
        result = mig_apply.run(stopping, request)
    except errors.GpuError as e:
        stopped: errors.GpuError | None = e
    else:
        stopped = None  # `at` is past the run's last request
    asked = node.client.get("nodes", "gpu-1")["metadata"]["labels"].get(keys.MIG_DESIRED_LABEL)

    if stopped is None:  # what it sent and answered says why, should it not have asked
        assert asked == "all-3g", (stopping.sent, result)
        return
    assert stopped.exit_code == 130
    if asked:
        assert stopped.message.startswith("mig apply was interrupted after asking gpu-1")
        assert "to undo, apply the config each had before: gpu-1: none" in stopped.hint
    else:
        assert (
            stopped.message == "mig apply was interrupted before it asked any node for the config"
        )
