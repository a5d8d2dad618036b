"""The cluster map joins what an agent saw of DRA on its node (PodResources `List` →
`dynamic_resources`: which container holds which device) with the API's claims (which
physical GPU): one row per holder, the container from the node, the GPU from the slice, and a
node-local allocation the API does not show is kept rather than lost."""

from __future__ import annotations

from kubectl_gpu.gpumap import clustermap, dra, report
from kubectl_gpu.gpumap.allocations import Allocation, Source
from kubectl_gpu.gpumap.join import NodeSources
from tests.gpumap import reportbuilders as b

GPU = b.uuid("GPU", 1)


def node_report(*allocations: Allocation) -> report.NodeReport:
    built = report.build("node-a", b.gpus(1, node=0), NodeSources(podresources=allocations), b.NOW)
    return built


def local(pod: str, device: str, claim: str = "c1") -> Allocation:
    return Allocation(
        None, "ml", pod, "main", f"claim:{claim}", (f"gpu.nvidia.com/node-a/{device}",), Source.DRA
    )


def api_rows(pod_names_container: bool) -> list:
    claim = dra.claim_of(b.claim("c1", "ml", "node-a", ["gpu-1"], "train"))
    assert claim is not None
    pod = b.claim_pod("train", "ml", "node-a", "c1", "trainer")
    if not pod_names_container:
        pod["spec"]["containers"][0]["resources"] = {}
    devices = dra.slice_devices(b.resource_slice("node-a", [b.gpu_device("gpu-1", GPU)]))
    return dra.rows([claim], devices, [dra.pod_claims(pod)])


def rows(*allocations: Allocation, pod_names_container: bool = False) -> list[tuple]:
    made = clustermap.make([node_report(*allocations)], api_rows(pod_names_container), [], b.NOW)
    return [
        (r.row.pod, r.row.container, r.row.gpu_uuid, r.row.resource, r.row.plane)
        for r in made.rows
        if r.row.plane == "dra"
    ]


def test_the_node_names_the_container_and_the_api_the_gpu() -> None:
    assert rows(local("train", "gpu-1")) == [("train", "main", GPU, "claim:c1/gpu", "dra")]


def test_a_holder_both_sides_know_is_shown_once() -> None:
    both = rows(local("train", "gpu-1"), pod_names_container=True)
    assert ("train", "trainer", GPU, "claim:c1/gpu", "dra") in both
    assert len([r for r in both if r[1] == "trainer"]) == 1


def test_an_allocation_only_the_node_saw_is_kept() -> None:
    found = rows(local("train", "gpu-1"), local("other", "gpu-7", "c9"))
    assert ("other", "main", None, "claim:c9", "dra") in found
