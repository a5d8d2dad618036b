"""DRA allocations map from the API alone: a claim result names a ResourceSlice device whose
`uuid` (or `parentUUID` for MIG) is the physical GPU, and the pods reserving the claim name
the containers that use it (directly, through a template, or as a DRA-backed extended
resource). Other drivers' devices are not GPU rows."""

from __future__ import annotations

from typing import Any

from kubectl_gpu.gpumap import dra
from tests.gpumap import reportbuilders as b

GPU = b.uuid("GPU", 1)
MIG = b.uuid("MIG", 2)


def slice_devices() -> list[dra.SliceDevice]:
    devices = [b.gpu_device("gpu-1", GPU), b.mig_device("gpu-0-mig-1g5gb-19-0", MIG, GPU, "1g.5gb")]
    return dra.slice_devices(b.resource_slice("node-a", devices))


def rows_for(claim: dict[str, Any], *pods: dict[str, Any]) -> list[tuple[Any, ...]]:
    found = dra.claim_of(claim)
    assert found is not None
    rows = dra.rows([found], slice_devices(), [dra.pod_claims(p) for p in pods])
    return [(r.node, r.gpu_uuid, r.mig_uuid, r.mig_profile, r.pod, r.container) for r in rows]


def test_a_whole_gpu_claim_resolves_to_the_slice_uuid() -> None:
    claim = b.claim("c1", "ml", "node-a", ["gpu-1"], "train")

    assert rows_for(claim, b.claim_pod("train", "ml", "node-a", "c1", "trainer")) == [
        ("node-a", GPU, None, None, "train", "trainer")
    ]


def test_a_mig_claim_resolves_to_its_parent_gpu_and_profile() -> None:
    claim = b.claim("c2", "ml", "node-a", ["gpu-0-mig-1g5gb-19-0"], "infer")

    assert rows_for(claim, b.claim_pod("infer", "ml", "node-a", "c2", "server")) == [
        ("node-a", GPU, MIG, "1g.5gb", "infer", "server")
    ]


def test_qualified_attribute_names_are_read_like_unqualified_ones() -> None:
    device = {"name": "gpu-9", "attributes": {"gpu.nvidia.com/uuid": {"string": GPU}}}
    [found] = dra.slice_devices(b.resource_slice("node-a", [device]))

    assert found.uuid == GPU and found.parent_uuid is None


def test_an_unreserved_claim_still_shows_its_device_without_a_pod() -> None:
    claim = b.claim("c3", "ml", "node-a", ["gpu-1"], None)

    assert rows_for(claim) == [("node-a", GPU, None, None, None, None)]


def test_a_claim_without_an_allocation_is_not_read() -> None:
    claim = b.claim("c4", "ml", "node-a", [], "x")

    assert dra.claim_of(claim) is None


def test_other_drivers_devices_are_not_gpu_rows() -> None:
    claim = b.claim("c5", "ml", "node-a", ["gpu-1"], "train")
    claim["status"]["allocation"]["devices"]["results"][0]["driver"] = "nic.example.com"

    assert rows_for(claim, b.claim_pod("train", "ml", "node-a", "c5", "trainer")) == []


def test_a_dra_backed_extended_resource_names_its_container() -> None:
    claim = b.claim("train-extended-resources-x", "ml", "node-a", ["gpu-1"], "train")
    pod = b.claim_pod("train", "ml", "node-a", "unused", "trainer")
    pod["spec"].pop("resourceClaims")
    pod["status"] = {
        "extendedResourceClaimStatus": {
            "resourceClaimName": "train-extended-resources-x",
            "requestMappings": [
                {"containerName": "trainer", "resourceName": "nvidia.com/gpu", "requestName": "gpu"}
            ],
        }
    }

    assert rows_for(claim, pod) == [("node-a", GPU, None, None, "train", "trainer")]


def test_a_container_asking_for_another_request_of_the_claim_is_not_its_holder() -> None:
    claim = b.claim("c6", "ml", "node-a", ["gpu-1"], "train")
    pod = b.claim_pod("train", "ml", "node-a", "c6", "trainer")
    pod["spec"]["containers"][0]["resources"]["claims"][0]["request"] = "nic"

    assert rows_for(claim, pod) == [("node-a", GPU, None, None, "train", None)]
