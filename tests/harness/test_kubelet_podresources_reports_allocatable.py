"""GetAllocatableResources through the generated stubs reports the node's healthy devices."""

from __future__ import annotations

from kubectl_gpu._proto.podresources.v1 import api_pb2
from tests.kit.node.kubelet import Allocatable, Devices, FakeKubelet, Memory, time_sliced_node
from tests.kit.node.kubelet.fixture import podresources_client


def _allocatable(kubelet: FakeKubelet) -> api_pb2.AllocatableResourcesResponse:
    with podresources_client(kubelet.target) as client:
        response: api_pb2.AllocatableResourcesResponse = client.GetAllocatableResources(
            api_pb2.AllocatableResourcesRequest(), timeout=5
        )
    return response


def test_every_time_slice_replica_is_allocatable(fake_kubelet: FakeKubelet) -> None:
    _, allocatable = time_sliced_node()
    fake_kubelet.set_allocatable(allocatable)

    devices = _allocatable(fake_kubelet).devices

    gpu = "GPU-4f2c7e1a-9b3d-4c8e-a1f0-6d5b2e8c9a17"
    assert [i for d in devices for i in d.device_ids] == [f"{gpu}::{n}" for n in range(4)]
    assert {d.resource_name for d in devices} == {"nvidia.com/gpu"}
    assert {n.ID for d in devices for n in d.topology.nodes} == {0}


def test_mig_and_full_gpus_are_reported_with_cpus_and_memory(fake_kubelet: FakeKubelet) -> None:
    fake_kubelet.set_allocatable(
        Allocatable(
            devices=(
                Devices("nvidia.com/gpu", ("GPU-a",)),
                Devices("nvidia.com/mig-1g.5gb", ("MIG-b", "MIG-c"), numa_nodes=(1,)),
            ),
            cpu_ids=(0, 1, 2, 3),
            memory=(Memory("memory", 64 << 30, (0,)),),
        )
    )

    response = _allocatable(fake_kubelet)

    assert [(d.resource_name, list(d.device_ids)) for d in response.devices] == [
        ("nvidia.com/gpu", ["GPU-a"]),
        ("nvidia.com/mig-1g.5gb", ["MIG-b"]),
        ("nvidia.com/mig-1g.5gb", ["MIG-c"]),
    ]
    assert list(response.cpu_ids) == [0, 1, 2, 3]
    assert response.memory[0].size == 64 << 30


def test_a_node_without_devices_reports_nothing(fake_kubelet: FakeKubelet) -> None:
    response = _allocatable(fake_kubelet)

    assert (list(response.devices), list(response.cpu_ids)) == ([], [])
    assert fake_kubelet.calls == ("GetAllocatableResources",)
