"""NVIDIA's own DRA kubelet plugin (gpu-kubelet-plugin v0.4.1, unmodified) on a simulated DRA
node publishes the node's ResourceSlices itself, from what the node's libnvidia-ml.so.1 answers.

What a user sees in `kubectl get resourceslices` is NVIDIA's shape, and these tests pin what it
showed where the project's own stand-in (tests/kit/cluster/drastandin.py, now only for the
served-version unit tests) had it otherwise (docs/simulated-dra.md, "What NVIDIA's plugin
showed"): the attributes a whole GPU carries and their values, MIG device names and capacities,
no counters for MIG devices that exist, and DynamicMIG's counter sets. The plugin runs in strict
mode: an NVML call the library does not implement would abort it, so every call it makes is
listed (docs/simulated-nvml.md).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.kit.cluster import NodeSpec
from tests.kit.cluster.cluster import SimCluster
from tests.kit.cluster.fixture import MakeSimCluster
from tests.kit.node import draplugin, sandbox

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(sandbox.unavailable() is not None, reason=str(sandbox.unavailable())),
]
Obj = dict[str, Any]
WHOLE_GPU_ATTRIBUTES = {
    "type", "uuid", "productName", "brand", "architecture", "driverVersion",
    "cudaComputeCapability", "cudaDriverVersion", "addressingMode",
    "resource.kubernetes.io/pciBusID",
}  # fmt: skip


@pytest.fixture(autouse=True)
def strict_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every DRA node's driver root in strict mode with the call log on, before its plugin runs."""
    start = draplugin.DraPluginRuntime.start_plugin

    def strict_start(self: draplugin.DraPluginRuntime, node: str) -> None:
        self.sides[node].driver.strict()
        self.sides[node].driver.trace()
        start(self, node)

    monkeypatch.setattr(draplugin.DraPluginRuntime, "start_plugin", strict_start)


def devices(cluster: SimCluster, node: str) -> dict[str, Obj]:
    found = {}
    for piece in cluster.store.list("resourceslices"):
        if piece["spec"].get("nodeName") == node:
            found.update({d["name"]: d for d in piece["spec"].get("devices") or []})
    return found


def counter_sets(cluster: SimCluster, node: str) -> dict[str, Obj]:
    return {
        s["name"]: s["counters"]
        for piece in cluster.store.list("resourceslices")
        if piece["spec"].get("nodeName") == node
        for s in piece["spec"].get("sharedCounters") or []
    }


def test_whole_gpus_and_existing_mig_devices_as_nvidia_publishes_them(
    sim_cluster: MakeSimCluster,
) -> None:
    node = NodeSpec("dra-1", "A100-SXM4-80GB", 2, dra=True, mig={1: ("3g.40gb", "1g.10gb")})
    cluster = sim_cluster([node])
    gpus = cluster.node_gpus("dra-1")
    found = devices(cluster, "dra-1")

    # the MIG-enabled GPU is offered only as its MIG devices, named
    # gpu-<minor>-mig-<profile>-<profile ID>-<placement start> (the stand-in numbered them 0, 1)
    assert set(found) == {"gpu-0"} | {n for n in found if n.startswith("gpu-1-mig-")}
    names = sorted(n for n in found if n != "gpu-0")
    assert [re.sub(r"-\d+$", "-S", n) for n in names] == [
        "gpu-1-mig-1g10gb-19-S", "gpu-1-mig-3g40gb-9-S",
    ]  # fmt: skip
    whole = found["gpu-0"]
    assert set(whole["attributes"]) == WHOLE_GPU_ATTRIBUTES
    value = {k: next(iter(v.values())) for k, v in whole["attributes"].items()}
    assert value["uuid"] == gpus[0].uuid
    assert (value["type"], value["brand"], value["architecture"]) == ("gpu", "Nvidia", "Ampere")
    # NVML's "580.159.04" as a semantic version; CUDA 13000 as 13.0.0; capability 8.0 as 8.0.0
    assert (value["driverVersion"], value["cudaDriverVersion"]) == ("580.159.4", "13.0.0")
    assert value["cudaComputeCapability"] == "8.0.0"
    bus = gpus[0].pci_bus_id.split(":", 1)[1].lower()  # NVML's 8-digit domain, as 4 digits
    assert value["resource.kubernetes.io/pciBusID"] == f"0000:{bus}"
    assert whole["capacity"] == {"memory": {"value": "80Gi"}}

    mig = found[names[1]]
    attributes = {k: next(iter(v.values())) for k, v in mig["attributes"].items()}
    assert attributes.items() >= {
        "type": "mig", "profile": "3g.40gb", "parentUUID": gpus[1].uuid,
    }.items()  # fmt: skip
    assert attributes["uuid"].startswith("MIG-")
    # the instance's own memory in MiB as NVML reports it, and its engines and memory slices,
    # where the stand-in had "40Gi" only; and no counters at all for a MIG device that exists
    capacity = {k: v["value"] for k, v in mig["capacity"].items()}
    assert (capacity["memory"], capacity["multiprocessors"]) == ("40192Mi", "42")
    assert len([k for k in capacity if k.startswith("memorySlice")]) == 4  # of the GPU's 8
    assert "consumesCounters" not in mig and counter_sets(cluster, "dra-1") == {}
    side = cluster.sides["dra-1"]
    assert side.driver.unimplemented() == []
    assert {"nvmlDeviceGetBrand", "nvmlDeviceGetAddressingMode"} <= set(side.driver.calls())


def test_dynamic_mig_publishes_counter_sets_that_whole_gpu_and_mig_devices_consume(
    sim_cluster: MakeSimCluster,
) -> None:
    cluster = sim_cluster(
        [NodeSpec("dra-1", "H100-SXM5-80GB", 1, dra=True)], dra_feature_gates=["DynamicMIG=true"]
    )
    [gpu] = cluster.node_gpus("dra-1")
    found = devices(cluster, "dra-1")
    sets = counter_sets(cluster, "dra-1")

    assert list(sets) == ["gpu-0-counter-set"]
    counters = {k: v["value"] for k, v in sets["gpu-0-counter-set"].items()}
    assert counters["memory"] == "81152Mi" and counters["multiprocessors"] == "132"
    assert {k for k in counters if k.startswith("memory-slice-")} == {
        f"memory-slice-{i}" for i in range(8)
    }
    # the whole GPU takes the whole set, so it and any MIG device exclude each other
    [whole_use] = found["gpu-0"]["consumesCounters"]
    assert whole_use["counters"] == sets["gpu-0-counter-set"]
    migs = {n: d for n, d in found.items() if n != "gpu-0"}
    assert migs and all(d["attributes"]["parentUUID"]["string"] == gpu.uuid for d in migs.values())
    # a MIG device not yet created has no UUID
    assert all("uuid" not in d["attributes"] for d in migs.values())
    small = [d for n, d in migs.items() if n.startswith("gpu-0-mig-1g10gb-19-")]
    assert len(small) == 7  # one per placement of 1g.10gb on an H100
    assert small[0]["consumesCounters"][0]["counters"]["memory"]["value"] == "9984Mi"
    assert cluster.sides["dra-1"].driver.unimplemented() == []


def test_dynamic_mig_prepare_creates_the_mig_device_through_nvml_and_unprepare_removes_it(
    sim_cluster: MakeSimCluster,
) -> None:
    """The scheduler allocates a 1g.10gb MIG device from the counters; NVIDIA's plugin, asked to
    prepare the claim, turns MIG on and creates that GPU instance and compute instance through
    the node's library (every process on the node then sees it), and destroys it once the pod is
    gone. The slice never names the new device's UUID (docs/simulated-dra.md)."""
    cluster = sim_cluster(
        [NodeSpec("dra-1", "H100-SXM5-80GB", 1, dra=True)], dra_feature_gates=["DynamicMIG=true"]
    )
    profile = "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"
    cluster.store.create({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "small", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "mig", "exactly": {
            "deviceClassName": "mig.nvidia.com", "selectors": [{"cel": {"expression": profile}}],
        }}]}},
    })  # fmt: skip
    cluster.store.create({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
        "spec": {"resourceClaims": [{"name": "mig", "resourceClaimName": "small"}],
                 "containers": [{"name": "main", "image": "cuda:12",
                                 "resources": {"claims": [{"name": "mig"}]}}]},
    })  # fmt: skip
    cluster.settle(60)
    assert cluster.dra_kubelet is not None
    uid = cluster.store.get("pods", "p", "default")["metadata"]["uid"]
    [claim] = cluster.dra_kubelet.claims_of(uid)
    [prepared] = claim.devices
    assert re.fullmatch(r"gpu-0-mig-1g10gb-19-\d+", prepared.device), prepared
    [view] = cluster.nodes["dra-1"].gpu_views()
    assert view.mig_enabled
    assert [(m.profile, m.uuid[:4]) for m in view.mig_devices] == [("1g.10gb", "MIG-")]
    assert all("uuid" not in d["attributes"] for d in devices(cluster, "dra-1").values()
               if d["name"] == prepared.device)  # fmt: skip

    cluster.store.delete("pods", "p", "default")
    cluster.settle(60)

    assert cluster.dra_kubelet.claims_of(uid) == []
    assert cluster.nodes["dra-1"].gpu_views()[0].mig_devices == ()
    assert cluster.sides["dra-1"].driver.unimplemented() == []
