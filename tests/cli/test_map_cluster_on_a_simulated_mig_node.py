"""End to end on the simulated cluster: an A100 node partitioned with MIG (mixed strategy, the
1g.10gb devices time-sliced 2 ways) runs pods; the node's facts (the kubelet's allocations, the
plugin's healthy devices, the NVML stand-in's GPUs and MIG devices) become the agent's report,
and `kubectl gpu map` resolves every pod to its physical GPU, MIG device, profile and replica."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kubectl_gpu import cluster
from kubectl_gpu.gpumap import join, report
from kubectl_gpu.gpumap.allocations import Allocation, Source, group_devices
from kubectl_gpu.gpumap.report import InventoryGpu, MigInstance, Placement
from kubectl_gpu.workflows import reports
from tests.conftest import CliResult
from tests.gpumap import reportbuilders as b
from tests.kit.cluster import NodeSpec, SimCluster
from tests.kit.cluster.fixture import MakeSimCluster

Run = Callable[..., CliResult]
pytestmark = pytest.mark.timeout(120)  # clusters on the real control plane
CONFIG = (
    "version: v1\nflags:\n  migStrategy: mixed\nsharing:\n  timeSlicing:\n    resources:\n"
    "    - name: nvidia.com/mig-1g.10gb\n      replicas: 2\n"
)


def mig_pod(name: str, resource: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "containers": [
                {"name": "cuda", "image": "cuda:12", "resources": {"limits": {resource: "1"}}}
            ]
        },
    }


def inventory(sim: SimCluster, node: str) -> list[InventoryGpu]:
    """What the agent reads through NVML, from the node's NVML stand-in."""
    found = []
    for gpu in sim.node_gpus(node):
        migs = tuple(
            MigInstance(
                ci.uuid,
                gi.profile.name,
                gi.id,
                ci.id,
                Placement(gi.placement.start, gi.placement.size),
            )
            for gi, ci in gpu.mig.mig_devices()
        )
        mode = report.MIG_ENABLED if gpu.mig_enabled else report.MIG_DISABLED
        found.append(
            InventoryGpu(
                gpu.index, gpu.uuid, gpu.name, gpu.index, gpu.memory_total >> 20, mode, migs
            )
        )
    return found


def publish_from_node(sim: SimCluster, node: str) -> None:
    held = tuple(
        Allocation(
            a.pod_uid,
            a.namespace,
            a.pod,
            a.container,
            a.resource,
            a.device_ids,
            Source.PODRESOURCES,
        )
        for a in sim.allocations(node)
    )
    healthy = group_devices(
        [(r, i) for r, ids in sim.advertised(node).items() for i in ids], Source.PODRESOURCES
    )
    sources = join.NodeSources(podresources=held, allocatable=healthy)
    built = report.build(node, inventory(sim, node), sources, b.NOW)
    api = cluster.connect(str(sim.kubeconfig))
    b.install(api)
    reports.publish(api, built, None)


def test_each_mig_pod_resolves_to_its_parent_gpu_profile_and_replica(
    sim_cluster: MakeSimCluster, run_cli: Run
) -> None:
    spec = NodeSpec(
        "gpu-a",
        "A100-SXM4-80GB",
        2,
        labels={"nvidia.com/device-plugin.config": "mixed"},
        mig={0: ["3g.40gb", "1g.10gb"]},
    )
    sim = sim_cluster([spec], layout="helm", configs={"mixed": CONFIG}, default_config="mixed")
    for name, resource in (
        ("big", "nvidia.com/mig-3g.40gb"),
        ("small-0", "nvidia.com/mig-1g.10gb"),
        ("small-1", "nvidia.com/mig-1g.10gb"),
        ("whole", "nvidia.com/gpu"),
    ):
        sim.client.create(mig_pod(name, resource))
    sim.settle()
    publish_from_node(sim, "gpu-a")

    result = run_cli("--kubeconfig", str(sim.kubeconfig), "map", "-o", "json")

    assert result.exit_code == 0, result.stderr
    rows = {r["pod"]: r for r in result.json["items"]}
    gpu0, gpu1 = sim.node_gpus("gpu-a")
    assert {rows[p]["gpu_uuid"] for p in ("big", "small-0", "small-1")} == {gpu0.uuid}
    assert (rows["whole"]["gpu_uuid"], rows["whole"]["mig_uuid"]) == (gpu1.uuid, None)
    assert rows["big"]["mig_profile"] == "3g.40gb" and rows["big"]["replica"] is None
    assert {rows[p]["mig_profile"] for p in ("small-0", "small-1")} == {"1g.10gb"}
    assert rows["small-0"]["mig_uuid"] == rows["small-1"]["mig_uuid"]
    assert {rows["small-0"]["replica"], rows["small-1"]["replica"]} == {0, 1}
    assert all(r["gpu_model"] == gpu0.name and r["node"] == "gpu-a" for r in rows.values())
