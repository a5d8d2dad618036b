"""The project's DRA-driver stand-in (drastandin.py, for served versions and features NVIDIA's
v0.4.1 cannot give) and the DRA scheduler step: slices in each served version's
shape, the chart's classes (extendedResourceName only on v1), counters that stop a
partitionable GPU from being over-allocated, firstAvailable tried in order, consumable shares,
and a claim nothing fits left unallocated with the reason; the step's writes are validated by a
real API server (tests/kit/plane/drareleases.py: nothing but kube-apiserver and etcd, so no real
scheduler competes for the claims)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.kit.cluster import drascheduler, drastandin
from tests.kit.cluster.drastandin import DraGpu, MigSlot
from tests.kit.plane.drareleases import BETAS, betas_on, serving
from tests.kit.plane.store import ApiStore

Obj = dict[str, Any]
SLOTS = (MigSlot("3g.40gb", "MIG-1", 40, 42), MigSlot("3g.40gb", "MIG-2", 40, 42),
         MigSlot("7g.80gb", "MIG-3", 80, 98))  # fmt: skip


def claim(store: Any, name: str, request: Obj) -> None:
    store.create({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [request]}},
    })  # fmt: skip


def results(store: Any, name: str) -> list[Obj]:
    found = store.get("resourceclaims", name, "default")["status"]["allocation"]["devices"]
    return list(found["results"])


def test_slices_take_each_versions_shape_and_classes_map_gpus_only_on_v1() -> None:
    gpus = [DraGpu(0, "GPU-0")]
    v1beta1 = drastandin.resource_slice("n1", gpus, "v1beta1")["spec"]["devices"][0]
    v1 = drastandin.resource_slice("n1", gpus, "v1")["spec"]["devices"][0]

    assert (
        v1beta1["basic"]["attributes"]["uuid"] == {"string": "GPU-0"}
        and "attributes" not in v1beta1
    )
    assert v1["attributes"]["uuid"] == {"string": "GPU-0"}
    mapped = {c["metadata"]["name"]: c["spec"].get("extendedResourceName")
              for c in drastandin.device_classes("v1")}  # fmt: skip
    assert mapped == {"gpu.nvidia.com": "nvidia.com/gpu", "mig.nvidia.com": None}
    assert all(
        "extendedResourceName" not in c["spec"] for c in drastandin.device_classes("v1beta2")
    )


@pytest.fixture
def store() -> Iterator[ApiStore]:
    with serving("v1") as served:
        if not betas_on(served.plane):
            pytest.skip(BETAS)
        yield served.store


def test_counters_keep_a_partitionable_gpu_from_being_over_allocated(store: ApiStore) -> None:
    drastandin.install(store, {"n1": [DraGpu(0, "GPU-0", migs=SLOTS)]})
    mig = {"name": "mig", "exactly": {"deviceClassName": "mig.nvidia.com"}}
    claim(store, "a", mig)
    claim(store, "b", mig)
    assert drascheduler.allocate(store) == ["default/a", "default/b"]
    assert [r["device"] for r in results(store, "a") + results(store, "b")] == [
        "gpu-0-mig-3g40gb-0",
        "gpu-0-mig-3g40gb-1",
    ]
    claim(store, "c", mig)  # the 7g.80gb slot needs counters the two 3g.40gb hold
    with pytest.raises(drascheduler.Unsatisfiable, match="request mig of claim c"):
        drascheduler.allocate(store)


def test_first_available_falls_back_in_order_and_shares_get_their_own_id(store: ApiStore) -> None:
    drastandin.install(store, {"n1": [DraGpu(0, "GPU-0", shareable=True)]})
    alternatives = [
        {"name": "mig", "deviceClassName": "mig.nvidia.com"},
        {"name": "whole", "deviceClassName": "gpu.nvidia.com",
         "capacity": {"requests": {"memory": "8Gi"}}},
    ]  # fmt: skip
    claim(store, "a", {"name": "gpu", "firstAvailable": alternatives})
    claim(store, "b", {"name": "gpu", "firstAvailable": alternatives})
    drascheduler.allocate(store)

    a, b = results(store, "a")[0], results(store, "b")[0]
    assert (a["request"], a["device"], a["consumedCapacity"]) == (
        "gpu/whole",
        "gpu-0",
        {"memory": "8Gi"},
    )
    assert b["device"] == "gpu-0" and a["shareID"] != b["shareID"]
