"""DRA allocations beyond one claim per GPU: several claims sharing one consumable device
(shareID), MIG partitions drawing on their GPU's counter set, the firstAvailable alternative
the scheduler chose, the sharing config in effect (class configs, then the claim's, the last
matching wins, as NVIDIA's driver decides), and v1beta1 slices that keep fields in `basic`."""

from __future__ import annotations

from typing import Any

from kubectl_gpu.dra import allocation, slices
from kubectl_gpu.gpumap import dra
from tests.gpumap import reportbuilders as b

GPU = b.uuid("GPU", 1)
MIG_A, MIG_B = b.uuid("MIG", 2), b.uuid("MIG", 3)
Obj = dict[str, Any]


def shared_gpu_slice() -> Obj:
    device = b.gpu_device("gpu-0", GPU)
    device["allowMultipleAllocations"] = True
    return b.resource_slice("node-a", [device])


def share(claim: Obj, share_id: str, memory: str) -> Obj:
    result = claim["status"]["allocation"]["devices"]["results"][0]
    result["shareID"] = share_id
    result["consumedCapacity"] = {"memory": memory}
    return claim


def test_two_claims_sharing_one_gpu_resolve_to_the_same_uuid_with_their_shares() -> None:
    first = share(b.claim("c1", "ml", "node-a", ["gpu-0"], "p1"), "a1b2", "10Gi")
    second = share(b.claim("c2", "ml", "node-a", ["gpu-0"], "p2"), "c3d4", "20Gi")
    claims = [dra.claim_of(c) for c in (first, second)]
    rows = dra.rows([c for c in claims if c], dra.slice_devices(shared_gpu_slice()), [])

    assert [(r.gpu_uuid, r.share_id, r.pod, r.plane) for r in rows] == [
        (GPU, "a1b2", "p1", "dra"),
        (GPU, "c3d4", "p2", "dra"),
    ]
    assert claims[0] and claims[0].results[0].consumed == (("memory", "10Gi"),)


def partitioned_slice(version: str = "v1") -> Obj:
    mig_a = b.mig_device("gpu-0-mig-3g40gb-0", MIG_A, GPU, "3g.40gb")
    mig_b = b.mig_device("gpu-0-mig-1g10gb-4", MIG_B, GPU, "1g.10gb")
    for device, memory, sms in ((mig_a, "40Gi", "42"), (mig_b, "10Gi", "14")):
        device["consumesCounters"] = [
            {
                "counterSet": "gpu-0-counters",
                "counters": {"memory": {"value": memory}, "multiprocessors": {"value": sms}},
            }
        ]
    found = b.resource_slice("node-a", [mig_a, mig_b])
    found["spec"]["sharedCounters"] = [
        {
            "name": "gpu-0-counters",
            "counters": {"memory": {"value": "80Gi"}, "multiprocessors": {"value": "98"}},
        }
    ]
    if version == "v1beta1":
        found["apiVersion"] = "resource.k8s.io/v1beta1"
        found["spec"]["devices"] = [
            {"name": d.pop("name"), "basic": d} for d in found["spec"]["devices"]
        ]
    return found


def test_a_partitioned_gpu_shows_what_its_allocated_partitions_take() -> None:
    claim = dra.claim_of(b.claim("c1", "ml", "node-a", ["gpu-0-mig-3g40gb-0"], "p1"))
    assert claim is not None
    published = partitioned_slice()
    rows = dra.rows([claim], dra.slice_devices(published), [], slices.counter_sets(published))

    [row] = rows
    assert (row.gpu_uuid, row.mig_uuid, row.mig_profile) == (GPU, MIG_A, "3g.40gb")
    assert row.counters == "memory 40Gi/80Gi, multiprocessors 42/98"


def test_v1beta1_slices_keep_device_fields_under_basic() -> None:
    published = partitioned_slice("v1beta1")
    devices = dra.slice_devices(published)

    assert [(d.uuid, d.parent_uuid, d.profile) for d in devices] == [
        (MIG_A, GPU, "3g.40gb"),
        (MIG_B, GPU, "1g.10gb"),
    ]
    assert devices[1].consumes[0][0] == "gpu-0-counters"


def test_the_chosen_first_available_alternative_is_named() -> None:
    raw = b.claim("c1", "ml", "node-a", ["gpu-0"], "p1")
    raw["status"]["allocation"]["devices"]["results"][0]["request"] = "gpu/h100"
    claim = dra.claim_of(raw)
    assert claim is not None

    assert claim.results[0].alternative == "h100"
    [row] = dra.rows([claim], dra.slice_devices(b.resource_slice("node-a", [
        b.gpu_device("gpu-0", GPU)])), [])  # fmt: skip
    assert row.resource == "claim:c1/gpu/h100"


def gpu_config(strategy: str | None, **settings: Any) -> Obj:
    parameters: Obj = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig"}
    if strategy:
        key = "timeSlicingConfig" if strategy == "TimeSlicing" else "mpsConfig"
        parameters["sharing"] = {"strategy": strategy, **({key: settings} if settings else {})}
    return parameters


def configured(*configs: tuple[str, list[str], Obj]) -> allocation.Claim:
    raw = b.claim("c1", "ml", "node-a", ["gpu-0"], "p1")
    raw["status"]["allocation"]["devices"]["config"] = [
        {"source": source, "requests": requests,
         "opaque": {"driver": "gpu.nvidia.com", "parameters": parameters}}
        for source, requests, parameters in configs
    ]  # fmt: skip
    claim = dra.claim_of(raw)
    assert claim is not None
    return claim


def sharing_of(claim: allocation.Claim, device_type: str = "gpu") -> str | None:
    config = allocation.config_in_effect(claim.configs, claim.results[0], device_type)
    return allocation.describe(config)


def test_the_claims_config_wins_over_its_classs() -> None:
    claim = configured(
        ("FromClaim", ["gpu"], gpu_config("MPS", defaultActiveThreadPercentage=50)),
        ("FromClass", ["gpu"], gpu_config("TimeSlicing", interval="Long")),
    )
    assert sharing_of(claim) == "MPS (50% SMs)"


def test_the_last_matching_config_wins_and_a_named_request_beats_an_unnamed_one() -> None:
    claim = configured(
        ("FromClaim", ["gpu"], gpu_config("TimeSlicing", interval="Short")),
        ("FromClaim", [], gpu_config("TimeSlicing", interval="Long")),
    )
    assert sharing_of(claim) == "TimeSlicing (Long)"
    claim = configured(("FromClaim", ["other"], gpu_config("MPS")))
    assert sharing_of(claim) is None  # the driver's defaults: no sharing


def test_a_config_naming_no_request_applies_only_to_devices_of_its_kind() -> None:
    claim = configured(("FromClaim", [], gpu_config("TimeSlicing", interval="Medium")))
    assert sharing_of(claim, "gpu") == "TimeSlicing (Medium)"
    assert sharing_of(claim, "mig") is None


def test_a_config_without_sharing_is_exclusive_access() -> None:
    assert sharing_of(configured(("FromClaim", ["gpu"], gpu_config(None)))) == "exclusive"
