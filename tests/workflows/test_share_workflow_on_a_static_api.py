"""The share workflow against a static API -- the real kube-apiserver with no controllers or
kubelets (tests/workflows/conftest.py) -- and time injected.

Nothing here recreates a deleted pod or changes a node's capacity, so every wait must end at
its deadline with the reason, and a fake clock makes those deadlines pass at once. A deleted
plugin pod stays Terminating, as on a node whose kubelet is gone: share must look past it.
"""

from __future__ import annotations

import json
import logging

import jsonschema
import pytest

from kubectl_gpu import cluster, keys
from kubectl_gpu.sharing import rollout
from kubectl_gpu.workflows.share import change, report
from kubectl_gpu.workflows.share.options import Options
from kubectl_gpu.workflows.waiting import Timing
from tests.conftest import ROOT
from tests.kit.kube.client import KubeClient
from tests.kit.plane.helmplane import NAMESPACE, FakeClock, live_pods, pod


def test_a_plugin_that_never_comes_back_fails_at_the_deadline(
    api: cluster.Api, static_client: KubeClient
) -> None:
    clock = FakeClock()
    options = Options(timeout=30, max_unavailable=1)
    result = change.share(
        api, rollout.ShareRequest(replicas=2), options, Timing(clock, clock.sleep)
    )
    rows = {r.node: r for r in result.nodes}
    assert rows["gpu-a"].result == "failed"
    assert rows["gpu-a"].message.startswith(
        "the plugin did not become Ready within 30s (no new pod appeared)"
    )
    assert "kubectl gpu share rollback" in rows["gpu-a"].message
    assert rows["gpu-b"].result == "not-restarted"  # stopped at the first failure
    assert result.failed
    assert 29 <= sum(clock.slept) <= 30.5  # backed-off polls, never past the deadline
    assert max(clock.slept) <= 1.0
    # the GFD pod beside the plugin was restarted with it; the other node's was left alone
    pods = {p["metadata"]["name"] for p in live_pods(static_client)}
    assert "gfd-gpu-a" not in pods and "gfd-gpu-b" in pods


def test_no_restart_leaves_the_plugins_and_says_so(
    api: cluster.Api, static_client: KubeClient
) -> None:
    before = {p["metadata"]["uid"] for p in live_pods(static_client)}
    result = change.share(api, rollout.ShareRequest(replicas=2), Options(restart=False))
    assert {r.result for r in result.nodes} == {"not-restarted"}
    assert "reads a changed key only at start" in result.nodes[0].message
    assert {p["metadata"]["uid"] for p in live_pods(static_client)} == before
    assert not result.failed


def test_wait_times_out_with_what_it_saw(
    api: cluster.Api, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    options = Options(restart=False, wait=True, timeout=12)
    with caplog.at_level(logging.INFO, logger="kubectl_gpu.workflows"):
        result = change.share(
            api, rollout.ShareRequest(replicas=3), options, Timing(clock, clock.sleep)
        )
    rows = {r.node: r for r in result.nodes}
    assert (rows["gpu-a"].result, rows["gpu-a"].after, rows["gpu-a"].expected) == (
        "timed-out",
        2,
        6,
    )
    assert rows["gpu-a"].message == "allocatable 2 nvidia.com/gpu after 12s, expected 6"
    assert result.failed
    progress = [r.getMessage() for r in caplog.records if r.getMessage().startswith("waiting for")]
    assert (
        progress[0] == "waiting for 2 node(s): gpu-a 2/6 nvidia.com/gpu, gpu-b 1/3 nvidia.com/gpu"
    )
    assert len(progress) == 1  # said once, not at every poll


def test_the_result_document_matches_its_schema(api: cluster.Api) -> None:
    result = change.share(api, rollout.ShareRequest(replicas=20), Options(restart=False))
    document = report.result_document(result)
    schema = json.loads((ROOT / "schemas" / "share-result.v1.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(document)
    [warning] = document["warnings"]  # more than 16 time-slicing replicas: no isolation
    assert warning["code"] == "sharing.many-replicas" and warning["file"].endswith(":any")
    assert document["changes"]["keys"][0]["before"] == "version: v1\n"


def test_max_unavailable_restarts_nodes_together(
    api: cluster.Api, static_client: KubeClient
) -> None:
    # two GPU models: each node is its model's proof of the config, so neither waits for the
    # other (one model's nodes: the first alone, tests/workflows/
    # test_share_proves_a_config_on_one_node_per_gpu_model.py)
    for name, model in (("gpu-a", "NVIDIA-H100-80GB-HBM3"), ("gpu-b", "NVIDIA-L4")):
        static_client.patch(
            "nodes", name, {"metadata": {"labels": {keys.GPU_PRODUCT_LABEL: model}}}
        )
    clock = FakeClock()
    options = Options(timeout=5, max_unavailable=2)
    result = change.share(
        api, rollout.ShareRequest(replicas=2), options, Timing(clock, clock.sleep)
    )
    # one batch of two: both plugins were deleted at once, both then missed the deadline
    assert {r.node: r.result for r in result.nodes} == {"gpu-a": "failed", "gpu-b": "failed"}
    assert live_pods(static_client) == []
    assert sum(clock.slept) <= 5.5  # one deadline for the batch, not one per node


def test_rollback_without_a_record_says_there_is_nothing_to_undo(api: cluster.Api) -> None:
    from kubectl_gpu import errors

    with pytest.raises(
        errors.GpuError, match="nothing to roll back: ConfigMap nvidia-device-plugin/"
    ):
        change.rollback(api, Options())


def test_a_plugin_ready_for_a_moment_then_crashing_is_a_failed_restart(
    api: cluster.Api, static_client: KubeClient
) -> None:
    # No readiness probe: kubelet shows the new plugin Ready as it starts, and one that
    # rejects its config exits a second later. share must not take that first look as "back".
    client = static_client
    clock = FakeClock()
    sleep = clock.sleep

    def time_passes(seconds: float) -> None:
        sleep(seconds)
        names = {p["metadata"]["name"] for p in live_pods(client)}
        if "plugin-gpu-a" not in names and "plugin-gpu-a-2" not in names:  # deleted by share
            started = clock.now
            new = pod("plugin-gpu-a-2", "gpu-a", "nvdp-nvidia-device-plugin",
                      "nvidia-device-plugin-ctr")  # fmt: skip
            new["metadata"]["annotations"] = {"started": str(started)}
            client.create(new)
            return
        if "plugin-gpu-a-2" in names:
            crashed = client.get("pods", "plugin-gpu-a-2", NAMESPACE)
            started = float(crashed["metadata"]["annotations"]["started"])
            if clock.now - started >= 1.5 and crashed["status"]["phase"] == "Running":
                crashed["status"] = {
                    "phase": "Running",
                    "conditions": [{"type": "Ready", "status": "False"}],
                    "containerStatuses": [{
                        "name": "nvidia-device-plugin-ctr", "ready": False, "restartCount": 1,
                        "image": "x", "imageID": "x",
                        "state": {"waiting": {"reason": "CrashLoopBackOff",
                                              "message": "back-off 10s restarting"}},
                    }],
                }  # fmt: skip
                client.update_status(crashed)

    options = Options(timeout=60, max_unavailable=1)
    result = change.share(
        api, rollout.ShareRequest(replicas=2), options, Timing(clock, time_passes)
    )

    rows = {r.node: r for r in result.nodes}
    assert rows["gpu-a"].result == "failed", rows["gpu-a"]
    assert "CrashLoopBackOff" in rows["gpu-a"].message
    assert rows["gpu-b"].result == "not-restarted"  # the rollout stopped at gpu-a
    assert result.failed
