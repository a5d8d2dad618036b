"""kubelet's PodResources v1 API as the stand-in serves it: pods, devices, memory and DRA
claims as List, Get and GetAllocatableResources return them (docs/upstream-facts.md N3), and
the servicer answering from the node's state. Must not start a server (`FakeKubelet` does)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import grpc

from kubectl_gpu._proto.podresources.v1 import api_pb2, api_pb2_grpc
from tests.kit.node.kubelet.pods import Allocatable, Claim, Devices, Memory, Pod


def _topology(numa_nodes: Sequence[int]) -> api_pb2.TopologyInfo:
    return api_pb2.TopologyInfo(nodes=[api_pb2.NUMANode(ID=node) for node in numa_nodes])


def container_devices(group: Devices) -> list[api_pb2.ContainerDevices]:
    """kubelet reports one ContainerDevices per device ID and NUMA node, with no topology at all
    when the plugin gave none (kubelet's containerDevicesFromResourceDeviceInstances)."""
    if not group.numa_nodes:
        return [
            api_pb2.ContainerDevices(resource_name=group.resource, device_ids=[i])
            for i in group.ids
        ]
    return [
        api_pb2.ContainerDevices(
            resource_name=group.resource, device_ids=[i], topology=_topology([node])
        )
        for i in group.ids
        for node in group.numa_nodes
    ]


def _memory(blocks: Sequence[Memory]) -> list[api_pb2.ContainerMemory]:
    return [
        api_pb2.ContainerMemory(
            memory_type=b.memory_type,
            size=b.size,
            topology=_topology(b.numa_nodes) if b.numa_nodes else None,
        )
        for b in blocks
    ]


def _dynamic(claim: Claim) -> api_pb2.DynamicResource:
    return api_pb2.DynamicResource(
        claim_name=claim.name,
        claim_namespace=claim.namespace,
        claim_resources=[
            api_pb2.ClaimResource(driver_name=d, pool_name=p, device_name=n)
            for d, p, n in claim.devices
        ],
    )


def pod_message(pod: Pod) -> api_pb2.PodResources:
    """One pod as List and Get return it."""
    containers = [
        api_pb2.ContainerResources(
            name=c.name,
            devices=[d for group in c.devices for d in container_devices(group)],
            cpu_ids=c.cpu_ids,
            memory=_memory(c.memory),
            dynamic_resources=[_dynamic(claim) for claim in c.claims],
        )
        for c in pod.containers
    ]
    return api_pb2.PodResources(
        name=pod.name,
        namespace=pod.namespace,
        containers=containers,
        cpu_ids=pod.cpu_ids,
        memory=_memory(pod.memory),
    )


class NodeState:
    """What the servicer answers from; replaced wholesale under a lock by the test thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pods: tuple[Pod, ...] = ()
        self.allocatable = Allocatable()
        self.get_enabled = True
        self.calls: list[str] = []
        # (namespace, name) of the node's pods the API server still has, asked at each call:
        # a kubelet deletes a pod's API object only once the pod has stopped and left its
        # active pods, which are all List reports (docs/upstream-facts.md N3); None: not asked
        self.active: Callable[[], set[tuple[str, str]]] | None = None


class PodResourcesServicer(api_pb2_grpc.PodResourcesListerServicer):
    """The three v1 RPCs (method names are the RPC names, hence CamelCase)."""

    def __init__(self, state: NodeState) -> None:
        self._state = state

    def _record(self, method: str) -> tuple[tuple[Pod, ...], Allocatable, bool]:
        with self._state.lock:
            self._state.calls.append(method)
            pods, allocatable, enabled = (
                self._state.pods, self._state.allocatable, self._state.get_enabled,
            )  # fmt: skip
            active = self._state.active
        if active is not None:  # never a pod the API server no longer has
            try:
                still = active()
            except Exception:  # noqa: BLE001 - the server unreachable (a test's teardown):
                return pods, allocatable, enabled  # what the stand-in last learnt, as before
            pods = tuple(p for p in pods if (p.namespace, p.name) in still)
        return pods, allocatable, enabled

    def List(
        self, request: api_pb2.ListPodResourcesRequest, context: grpc.ServicerContext
    ) -> api_pb2.ListPodResourcesResponse:
        pods, _, _ = self._record("List")
        return api_pb2.ListPodResourcesResponse(pod_resources=[pod_message(p) for p in pods])

    def GetAllocatableResources(
        self, request: api_pb2.AllocatableResourcesRequest, context: grpc.ServicerContext
    ) -> api_pb2.AllocatableResourcesResponse:
        _, allocatable, _ = self._record("GetAllocatableResources")
        return api_pb2.AllocatableResourcesResponse(
            devices=[d for group in allocatable.devices for d in container_devices(group)],
            cpu_ids=allocatable.cpu_ids,
            memory=_memory(allocatable.memory),
        )

    def Get(
        self, request: api_pb2.GetPodResourcesRequest, context: grpc.ServicerContext
    ) -> api_pb2.GetPodResourcesResponse:
        pods, _, get_enabled = self._record("Get")
        # kubelet returns plain Go errors here, which grpc-go sends as code UNKNOWN
        if not get_enabled:
            context.abort(grpc.StatusCode.UNKNOWN, "PodResources API Get method disabled")
        for pod in pods:
            if (pod.name, pod.namespace) == (request.pod_name, request.pod_namespace):
                return api_pb2.GetPodResourcesResponse(pod_resources=pod_message(pod))
        message = f"pod {request.pod_name} in namespace {request.pod_namespace} not found"
        context.abort(grpc.StatusCode.UNKNOWN, message)
        raise AssertionError("unreachable: abort raises")
