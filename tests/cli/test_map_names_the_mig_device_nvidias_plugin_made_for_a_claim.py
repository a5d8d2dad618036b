"""`kubectl gpu map` names the MIG device NVIDIA's DRA kubelet plugin (v0.4.1, DynamicMIG on)
created for a claim: the ResourceSlice offers MIG devices that do not exist yet (no `uuid`),
the plugin creates the GPU and compute instance through NVML when it prepares the claim, and the
map finds that MIG device's UUID and placement in the node agent's report (NVML), where the
device name NVIDIA gave it puts it (`gpu-<minor>-mig-<profile>-<profile ID>-<placement
start>`). Before, the row had the parent GPU only (`mig_uuid` null)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import CliResult, eventually
from tests.kit.cluster import NodeSpec
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.node import sandbox

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(sandbox.unavailable() is not None, reason=str(sandbox.unavailable())),
]
Run = Callable[..., CliResult]
Obj = dict[str, Any]
ONE_G = "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"


def test_a_dynamic_mig_claim_is_mapped_to_the_mig_device_made_for_it(
    sim_cluster: MakeSimCluster, run_cli: Run
) -> None:
    cluster = sim_cluster(
        [NodeSpec("dra-1", "H100-SXM5-80GB", 1, dra=True)],
        agents=True,
        dra_feature_gates=["DynamicMIG=true"],
    )
    [gpu] = cluster.node_gpus("dra-1")
    installed = run_cli("--kubeconfig", str(cluster.kubeconfig), "install")  # the agent
    assert installed.exit_code == 0, installed.stderr
    cluster.client.create({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "small", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "mig", "exactly": {
            "deviceClassName": "mig.nvidia.com", "selectors": [{"cel": {"expression": ONE_G}}],
        }}]}},
    })  # fmt: skip
    cluster.client.create({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "infer", "namespace": "default"},
        "spec": {"resourceClaims": [{"name": "mig", "resourceClaimName": "small"}],
                 "containers": [{"name": "main", "image": "cuda:12",
                                 "resources": {"claims": [{"name": "mig"}]}}]},
    })  # fmt: skip
    cluster.settle(60)
    [result] = cluster.client.get("resourceclaims", "small", "default")["status"]["allocation"][
        "devices"
    ]["results"]
    start = int(result["device"].rsplit("-", 1)[1])  # where NVIDIA's name puts the instance
    [mig] = cluster.nodes["dra-1"].gpu_views()[0].mig_devices  # made by NVIDIA's prepare

    def mapped() -> Obj | None:
        answer = run_cli("--kubeconfig", str(cluster.kubeconfig), "map", "-A", "-o", "json")
        assert answer.exit_code == 0, answer.stderr
        rows = [r for r in answer.json["items"] if r["pod"] == "infer"]
        return rows[0] if rows and rows[0]["gpu_index"] is not None else None  # agent reported

    row = eventually(mapped, 60)

    assert row is not None, "map never named the MIG device NVIDIA's plugin made"
    assert (row["plane"], row["node"], row["container"]) == ("dra", "dra-1", "main")
    assert (row["gpu_uuid"], row["mig_uuid"], row["mig_profile"]) == (gpu.uuid, mig.uuid, "1g.10gb")
    assert row["mig_placement"] == {"start": start, "size": 1}
    assert row["device_id"] == f"gpu.nvidia.com/dra-1/{result['device']}"
