"""A claim NVIDIA's DRA kubelet plugin (v0.4.1, on a simulated DRA node) refuses at
NodePrepareResources keeps its pod from running, as a kubelet does (it creates no sandbox and
records FailedPrepareDynamicResources with the driver's error, then tries again); `kubectl gpu
doctor POD` names the DRA layer and NVIDIA's own words. A claim the plugin prepares runs.

The refused claim carries a GpuConfig with a misspelt field (`sharng`): the scheduler allocates
it (opaque configs are the driver's to read), and NVIDIA's strict decoding refuses it on the
node."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.cli.doctorpods import by_layer
from tests.conftest import CliResult, eventually
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.node import sandbox

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(sandbox.unavailable() is not None, reason=str(sandbox.unavailable())),
]
Run = Callable[..., CliResult]
Obj = dict[str, Any]
MISSPELT = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
            "sharng": {"strategy": "TimeSlicing"}}  # fmt: skip


def claim_and_pod(cluster: SimCluster, name: str, parameters: Obj | None) -> None:
    devices: Obj = {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}
    if parameters is not None:
        devices["config"] = [{"opaque": {"driver": "gpu.nvidia.com", "parameters": parameters}}]
    cluster.client.create({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"devices": devices},
    })  # fmt: skip
    cluster.client.create({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
                 "containers": [{"name": "main", "image": "cuda:12",
                                 "resources": {"claims": [{"name": "gpu"}]}}]},
    })  # fmt: skip


def phase(cluster: SimCluster, pod: str) -> str:
    return str((cluster.client.get("pods", pod, "default").get("status") or {}).get("phase"))


def prepare_events(cluster: SimCluster, pod: str) -> list[Obj]:
    return [
        e
        for e in cluster.client.list("events", namespace="default")
        if e["involvedObject"]["name"] == pod and e["reason"] == "FailedPrepareDynamicResources"
    ]


def test_a_refused_claim_keeps_its_pod_pending_and_doctor_quotes_nvidia(
    sim_cluster: MakeSimCluster, run_cli: Run
) -> None:
    cluster = sim_cluster([NodeSpec("dra-1", "A100-SXM4-80GB", 2, dra=True)])
    claim_and_pod(cluster, "refused", MISSPELT)
    claim_and_pod(cluster, "plain", None)

    assert eventually(lambda: phase(cluster, "plain") == "Running", 60), "prepared, not running"
    [event] = eventually(lambda: prepare_events(cluster, "refused"), 60)
    cluster.settle()

    # the kubelet's words around NVIDIA's (k8s.io/kubernetes pkg/kubelet/cm/dra)
    assert event["type"] == "Warning" and event["source"]["component"] == "kubelet"
    assert event["message"].startswith(
        "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources "
        "failed for ResourceClaim refused: "
    )
    nvidia = event["message"].split("ResourceClaim refused: ", 1)[1]
    assert "sharng" in nvidia  # NVIDIA's strict decoding names the misspelt field
    assert phase(cluster, "refused") == "Pending"  # its sandbox was never created

    result = run_cli(
        "--kubeconfig", str(cluster.kubeconfig), "doctor", "refused", "-o", "json"
    )  # fmt: skip

    assert result.exit_code == 1, result.stderr
    [found] = by_layer(result.json, "dra")
    assert found["severity"] == "error" and found["object"] == "pod/refused"
    assert found["message"].startswith("the DRA driver could not prepare the pod's devices:")
    assert nvidia in found["message"]
    assert any("sharng" in e for e in found["evidence"]), found["evidence"]
    table = run_cli("--kubeconfig", str(cluster.kubeconfig), "doctor", "refused")
    assert table.exit_code == 1 and "sharng" in table.stdout
