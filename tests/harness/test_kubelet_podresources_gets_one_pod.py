"""Get through the generated stubs returns one pod, and fails for an unknown pod the way kubelet
does: a plain Go error, so gRPC code UNKNOWN with kubelet's message (server_v1.go)."""

from __future__ import annotations

import grpc
import pytest

from kubectl_gpu._proto.podresources.v1 import api_pb2
from tests.kit.node.kubelet import Container, Devices, FakeKubelet, Pod
from tests.kit.node.kubelet.fixture import podresources_client

TRAINER = Pod("trainer", "ml", (Container("main", (Devices("nvidia.com/gpu", ("GPU-a::1",)),)),))
OTHER = Pod("trainer", "other", (Container("main", (Devices("nvidia.com/gpu", ("GPU-b",)),)),))


def _get(kubelet: FakeKubelet, name: str, namespace: str) -> api_pb2.PodResources:
    request = api_pb2.GetPodResourcesRequest(pod_name=name, pod_namespace=namespace)
    with podresources_client(kubelet.target) as client:
        response: api_pb2.GetPodResourcesResponse = client.Get(request, timeout=5)
    return response.pod_resources


def test_get_returns_the_pod_of_that_namespace(fake_kubelet: FakeKubelet) -> None:
    fake_kubelet.set_pods([OTHER, TRAINER])

    pod = _get(fake_kubelet, "trainer", "ml")

    assert (pod.name, pod.namespace) == ("trainer", "ml")
    assert list(pod.containers[0].devices[0].device_ids) == ["GPU-a::1"]


def test_get_of_an_unknown_pod_fails_with_kubelets_error(fake_kubelet: FakeKubelet) -> None:
    fake_kubelet.set_pods([TRAINER])

    with pytest.raises(grpc.RpcError) as failure:
        _get(fake_kubelet, "trainer", "default")

    assert failure.value.code() == grpc.StatusCode.UNKNOWN
    assert failure.value.details() == "pod trainer in namespace default not found"


def test_get_fails_when_the_kubelet_gate_is_off(fake_kubelet: FakeKubelet) -> None:
    fake_kubelet.set_pods([TRAINER])
    fake_kubelet.set_get_enabled(False)

    with pytest.raises(grpc.RpcError) as failure:
        _get(fake_kubelet, "trainer", "ml")

    assert failure.value.code() == grpc.StatusCode.UNKNOWN
    assert failure.value.details() == "PodResources API Get method disabled"
