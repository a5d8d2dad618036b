"""A kubelet restart replaces kubelet.sock by a new file in the same directory; clients that
watch the directory (docs/upstream-facts.md N1.1) reach the new server, and a stopped kubelet is
UNAVAILABLE."""

from __future__ import annotations

import stat

import grpc
import pytest

from kubectl_gpu._proto.podresources.v1 import api_pb2, api_pb2_grpc
from tests.kit.node.kubelet import Container, FakeKubelet, Pod
from tests.kit.node.kubelet.fixture import podresources_client

REQUEST = api_pb2.ListPodResourcesRequest()


def _names(kubelet: FakeKubelet) -> list[str]:
    with podresources_client(kubelet.target) as client:
        response = client.List(REQUEST, timeout=5)
    return [p.name for p in response.pod_resources]


def test_a_client_connecting_after_a_restart_is_served(fake_kubelet: FakeKubelet) -> None:
    fake_kubelet.set_pods([Pod("before", "ns", (Container("c"),))])
    assert _names(fake_kubelet) == ["before"]

    fake_kubelet.stop()
    assert not fake_kubelet.socket_path.exists()
    fake_kubelet.set_pods([Pod("after", "ns", (Container("c"),))])
    fake_kubelet.start()

    assert stat.S_ISSOCK(fake_kubelet.socket_path.stat().st_mode)
    assert _names(fake_kubelet) == ["after"]


def test_a_channel_opened_before_the_restart_reconnects(fake_kubelet: FakeKubelet) -> None:
    with grpc.insecure_channel(fake_kubelet.target) as channel:
        client = api_pb2_grpc.PodResourcesListerStub(channel)
        client.List(REQUEST, timeout=5)

        fake_kubelet.restart()

        response = client.List(REQUEST, timeout=5, wait_for_ready=True)
    assert list(response.pod_resources) == []
    assert fake_kubelet.calls == ("List", "List")


def test_a_stopped_kubelet_is_unavailable(fake_kubelet: FakeKubelet) -> None:
    fake_kubelet.stop()

    with pytest.raises(grpc.RpcError) as failure:
        _names(fake_kubelet)

    assert failure.value.code() == grpc.StatusCode.UNAVAILABLE
