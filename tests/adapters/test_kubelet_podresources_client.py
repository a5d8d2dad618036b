"""The PodResources client talks to the kubelet stand-in's real gRPC server over a unix socket:
allocations come back as kubelet reports them, a restart between calls is harmless, and every
gRPC failure is a KubeletError naming the socket and the code."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubectl_gpu import kubelet
from kubectl_gpu._proto.podresources.v1 import api_pb2
from kubectl_gpu.errors import KubeletError
from kubectl_gpu.gpumap import join
from kubectl_gpu.gpumap.allocations import Allocation, PodRef, Source
from tests.kit.node.kubelet import (
    Allocatable,
    Container,
    Devices,
    FakeKubelet,
    Pod,
    time_sliced_node,
)

GPU = "GPU-4f2c7e1a-9b3d-4c8e-a1f0-6d5b2e8c9a17"
MIG_A = "MIG-6e1b7c2a-4d3f-5a8e-9b0c-1f2d3e4a5b6c"
MIG_B = "MIG-9c8d7e6f-5a4b-5c3d-8e2f-0a1b2c3d4e5f"


def held(
    allocations: tuple[Allocation, ...],
) -> list[tuple[str, str, str, tuple[str, ...]]]:
    return [(f"{a.namespace}/{a.pod}", a.container, a.resource, a.device_ids) for a in allocations]


def test_time_sliced_replicas_are_listed_per_container(fake_kubelet: FakeKubelet) -> None:
    fake_kubelet.set_pods(time_sliced_node()[0])

    allocations = kubelet.list_pod_resources(fake_kubelet.socket_path, timeout=5)

    assert held(allocations) == [
        ("ml/llm-a-7d9f8b6c5-x2k4q", "main", "nvidia.com/gpu", (f"{GPU}::0",)),
        ("ml/llm-b-7d9f8b6c5-m7p2z", "main", "nvidia.com/gpu", (f"{GPU}::1",)),
        ("ml/notebook-0", "main", "nvidia.com/gpu", (f"{GPU}::2", f"{GPU}::3")),
    ]
    assert {(a.pod_uid, a.source) for a in allocations} == {(None, Source.PODRESOURCES)}


def test_mig_devices_and_numa_repeats_come_back_once_per_resource(
    fake_kubelet: FakeKubelet,
) -> None:
    small = Devices("nvidia.com/mig-1g.5gb", (MIG_A, MIG_B), numa_nodes=(0, 1))
    fake_kubelet.set_pods([Pod("infer", "serving", (Container("server", (small,)),))])

    allocations = kubelet.list_pod_resources(fake_kubelet.socket_path, timeout=5)

    assert held(allocations) == [
        ("serving/infer", "server", "nvidia.com/mig-1g.5gb", (MIG_A, MIG_B))
    ]


def test_allocatable_devices_are_grouped_by_resource(fake_kubelet: FakeKubelet) -> None:
    fake_kubelet.set_allocatable(time_sliced_node()[1])

    allocatable = kubelet.allocatable_resources(fake_kubelet.socket_path, timeout=5)

    assert allocatable.source is Source.PODRESOURCES
    assert allocatable.device_ids("nvidia.com/gpu") == tuple(f"{GPU}::{n}" for n in range(4))


def test_get_returns_one_pod(fake_kubelet: FakeKubelet) -> None:
    fake_kubelet.set_pods(time_sliced_node()[0])

    allocations = kubelet.get_pod_resources(fake_kubelet.socket_path, "ml", "notebook-0", 5)

    assert held(allocations) == [
        ("ml/notebook-0", "main", "nvidia.com/gpu", (f"{GPU}::2", f"{GPU}::3"))
    ]


def test_get_for_an_unknown_pod_says_it_is_not_on_this_node(fake_kubelet: FakeKubelet) -> None:
    with pytest.raises(KubeletError) as failure:
        kubelet.get_pod_resources(fake_kubelet.socket_path, "ml", "ghost", 5)

    message = failure.value.message
    assert str(fake_kubelet.socket_path) in message and "Get" in message and "UNKNOWN" in message
    assert failure.value.hint == "the pod does not run on this node"


def test_a_kubelet_restart_between_calls_is_harmless(fake_kubelet: FakeKubelet) -> None:
    fake_kubelet.set_pods(
        [Pod("before", "ns", (Container("c", (Devices("nvidia.com/gpu", (GPU,)),)),))]
    )
    first = kubelet.list_pod_resources(fake_kubelet.socket_path, timeout=5)

    fake_kubelet.restart()
    fake_kubelet.set_pods(
        [Pod("after", "ns", (Container("c", (Devices("nvidia.com/gpu", (GPU,)),)),))]
    )
    second = kubelet.list_pod_resources(fake_kubelet.socket_path, timeout=5)

    assert [a.pod for a in first] == ["before"] and [a.pod for a in second] == ["after"]
    assert fake_kubelet.calls == ("List", "List")


def test_a_stopped_kubelet_is_a_kubelet_error_naming_socket_and_code(
    fake_kubelet: FakeKubelet,
) -> None:
    fake_kubelet.stop()

    with pytest.raises(KubeletError) as failure:
        kubelet.list_pod_resources(fake_kubelet.socket_path, timeout=2)

    assert str(fake_kubelet.socket_path) in failure.value.message
    assert "UNAVAILABLE" in failure.value.message
    assert "the directory, not the socket" in failure.value.hint


def test_a_socket_that_was_never_there_is_a_kubelet_error(tmp_path: Path) -> None:
    socket = tmp_path / "pod-resources" / "kubelet.sock"

    with pytest.raises(KubeletError) as failure:
        kubelet.allocatable_resources(socket, timeout=2)

    assert (
        str(socket) in failure.value.message and "GetAllocatableResources" in failure.value.message
    )


def test_dra_claims_become_allocations_named_driver_pool_device() -> None:
    claim = api_pb2.DynamicResource(
        claim_name="gpu-claim",
        claim_namespace="ml",
        claim_resources=[
            api_pb2.ClaimResource(
                driver_name="gpu.nvidia.com", pool_name="node1", device_name="gpu-0"
            )
        ],
    )
    pod = api_pb2.PodResources(
        name="p",
        namespace="ml",
        containers=[api_pb2.ContainerResources(name="c", dynamic_resources=[claim])],
    )

    (allocation,) = kubelet.allocations_from_pods([pod])

    assert (allocation.resource, allocation.device_ids, allocation.source) == (
        "claim:gpu-claim",
        ("gpu.nvidia.com/node1/gpu-0",),
        Source.DRA,
    )


def test_a_checkpoint_entry_for_a_pod_kubelet_dropped_is_found(fake_kubelet: FakeKubelet) -> None:
    pods, allocatable = time_sliced_node()
    fake_kubelet.set_pods(pods)
    fake_kubelet.set_allocatable(allocatable)
    checkpoint = kubelet.read_checkpoint(fake_kubelet.write_checkpoint())
    fake_kubelet.set_pods(pods[:2])  # notebook-0 deleted; the checkpoint still holds it

    sources = join.NodeSources(
        node="node1",
        checkpoint=checkpoint.allocations,
        registered=checkpoint.registered,
        podresources=kubelet.list_pod_resources(fake_kubelet.socket_path, timeout=5),
        allocatable=kubelet.allocatable_resources(fake_kubelet.socket_path, timeout=5),
    )
    node_map = join.make(sources, [PodRef(p.pod_uid, p.namespace, p.name) for p in pods])

    assert [(r.pod, r.pod_uid, r.replica) for r in node_map.rows] == [
        ("llm-a-7d9f8b6c5-x2k4q", pods[0].pod_uid, 0),
        ("llm-b-7d9f8b6c5-m7p2z", pods[1].pod_uid, 1),
    ]
    assert [f.code for f in node_map.findings] == ["map.stale-checkpoint-entry"]
    assert "ml/notebook-0" in node_map.findings[0].message
    assert [r.replica for r in node_map.free] == [2, 3]


def test_an_allocated_device_kubelet_stopped_offering_is_unhealthy(
    fake_kubelet: FakeKubelet,
) -> None:
    pods, _ = time_sliced_node()
    fake_kubelet.set_pods(pods[:1])
    fake_kubelet.set_allocatable(Allocatable((Devices("nvidia.com/gpu", (f"{GPU}::1",)),)))

    sources = join.NodeSources(
        podresources=kubelet.list_pod_resources(fake_kubelet.socket_path, timeout=5),
        allocatable=kubelet.allocatable_resources(fake_kubelet.socket_path, timeout=5),
    )

    (finding,) = join.make(sources).findings
    assert finding.code == "map.device-unhealthy" and f"{GPU}::0" in finding.message
