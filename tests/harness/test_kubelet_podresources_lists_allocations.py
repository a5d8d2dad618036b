"""List through the generated stubs returns what the kubelet stand-in holds, shaped as kubelet
shapes it: one ContainerDevices per device ID and NUMA node, advertised IDs verbatim."""

from __future__ import annotations

from kubectl_gpu._proto.podresources.v1 import api_pb2
from tests.kit.node.kubelet import Container, Devices, FakeKubelet, Memory, Pod, time_sliced_node
from tests.kit.node.kubelet.fixture import podresources_client

MIG_A = "MIG-6e1b7c2a-4d3f-5a8e-9b0c-1f2d3e4a5b6c"
MIG_B = "MIG-9c8d7e6f-5a4b-5c3d-8e2f-0a1b2c3d4e5f"


def _list(kubelet: FakeKubelet) -> api_pb2.ListPodResourcesResponse:
    with podresources_client(kubelet.target) as client:
        response: api_pb2.ListPodResourcesResponse = client.List(
            api_pb2.ListPodResourcesRequest(), timeout=5
        )
    return response


def _ids(pod: api_pb2.PodResources) -> list[tuple[str, str, str]]:
    return [
        (c.name, d.resource_name, i)
        for c in pod.containers
        for d in c.devices
        for i in d.device_ids
    ]


def test_time_sliced_replicas_are_listed_with_their_suffix(fake_kubelet: FakeKubelet) -> None:
    pods, _ = time_sliced_node()
    fake_kubelet.set_pods(pods)

    listed = {p.name: _ids(p) for p in _list(fake_kubelet).pod_resources}

    gpu = "GPU-4f2c7e1a-9b3d-4c8e-a1f0-6d5b2e8c9a17"
    assert listed["llm-b-7d9f8b6c5-m7p2z"] == [("main", "nvidia.com/gpu", f"{gpu}::1")]
    assert listed["notebook-0"] == [
        ("main", "nvidia.com/gpu", f"{gpu}::2"),
        ("main", "nvidia.com/gpu", f"{gpu}::3"),
    ]


def test_mig_devices_are_listed_under_their_mixed_strategy_resource(
    fake_kubelet: FakeKubelet,
) -> None:
    small = Devices("nvidia.com/mig-1g.5gb", (MIG_A,))
    large = Devices("nvidia.com/mig-3g.20gb", (MIG_B,))
    fake_kubelet.set_pods(
        [Pod("infer", "serving", (Container("server", (small,)), Container("sidecar", (large,))))]
    )

    (pod,) = _list(fake_kubelet).pod_resources

    assert (pod.name, pod.namespace) == ("infer", "serving")
    assert _ids(pod) == [
        ("server", "nvidia.com/mig-1g.5gb", MIG_A),
        ("sidecar", "nvidia.com/mig-3g.20gb", MIG_B),
    ]


def test_devices_without_topology_carry_no_numa_node(fake_kubelet: FakeKubelet) -> None:
    fake_kubelet.set_pods(
        [Pod("p", "ns", (Container("c", (Devices("nvidia.com/gpu", ("GPU-a",)),)),))]
    )

    (device,) = _list(fake_kubelet).pod_resources[0].containers[0].devices

    assert not device.HasField("topology")


def test_a_device_on_two_numa_nodes_is_reported_once_per_node(fake_kubelet: FakeKubelet) -> None:
    group = Devices("nvidia.com/gpu", ("GPU-a", "GPU-b"), numa_nodes=(0, 1))
    fake_kubelet.set_pods([Pod("p", "ns", (Container("c", (group,)),))])

    devices = _list(fake_kubelet).pod_resources[0].containers[0].devices

    assert [(list(d.device_ids), [n.ID for n in d.topology.nodes]) for d in devices] == [
        (["GPU-a"], [0]),
        (["GPU-a"], [1]),
        (["GPU-b"], [0]),
        (["GPU-b"], [1]),
    ]


def test_containers_without_devices_are_listed_with_empty_cpus_and_memory(
    fake_kubelet: FakeKubelet,
) -> None:
    fake_kubelet.set_pods([Pod("web", "default", (Container("nginx"),))])

    (container,) = _list(fake_kubelet).pod_resources[0].containers

    assert container.name == "nginx"
    assert (list(container.devices), list(container.cpu_ids), list(container.memory)) == (
        [],
        [],
        [],
    )


def test_exclusive_cpus_and_memory_are_listed(fake_kubelet: FakeKubelet) -> None:
    container = Container("c", cpu_ids=(2, 3), memory=(Memory("hugepages-1Gi", 2 << 30, (1,)),))
    fake_kubelet.set_pods([Pod("p", "ns", (container,), cpu_ids=(4,))])

    (pod,) = _list(fake_kubelet).pod_resources
    (memory,) = pod.containers[0].memory

    assert list(pod.containers[0].cpu_ids) == [2, 3]
    assert (memory.memory_type, memory.size, memory.topology.nodes[0].ID) == (
        "hugepages-1Gi",
        2 << 30,
        1,
    )
    assert list(pod.cpu_ids) == [4]


def test_list_follows_pods_replaced_while_serving(fake_kubelet: FakeKubelet) -> None:
    fake_kubelet.set_pods([Pod("old", "ns", (Container("c"),))])
    assert [p.name for p in _list(fake_kubelet).pod_resources] == ["old"]

    fake_kubelet.set_pods([])

    assert list(_list(fake_kubelet).pod_resources) == []
    assert fake_kubelet.calls == ("List", "List")
