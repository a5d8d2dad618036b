"""The kubelet stand-in's List and Get never report a pod the API server no longer has, however
late the simulated kubelet learns of its deletion: a kubelet deletes a pod's API object only
once the pod stopped being active, and List reports active pods only (docs/upstream-facts.md
N3). Without this, an agent asked to change MIG right after `mig apply --drain` saw its evicted
pods gone refused with "GPU 0 is in use (pod …)" on a busy simulated fleet (docs/performance.md,
"mig apply --drain across the fleet")."""

from __future__ import annotations

import grpc
import pytest

from kubectl_gpu._proto.podresources.v1 import api_pb2
from tests.kit.node.kubelet import Container, Devices, FakeKubelet, Pod
from tests.kit.node.kubelet.fixture import podresources_client

EVICTED = Pod("train-a", "ml", (Container("main", (Devices("nvidia.com/gpu", ("GPU-a",)),)),))
STAYING = Pod("train-b", "ml", (Container("main", (Devices("nvidia.com/gpu", ("GPU-b",)),)),))


def test_a_pod_gone_from_the_api_is_not_listed_before_the_kubelet_caught_up(
    fake_kubelet: FakeKubelet,
) -> None:
    fake_kubelet.set_pods([EVICTED, STAYING])  # what the simulated kubelet saw last
    in_api = {("ml", "train-a"), ("ml", "train-b")}
    fake_kubelet.set_active(lambda: set(in_api))

    with podresources_client(fake_kubelet.target) as client:
        before = client.List(api_pb2.ListPodResourcesRequest(), timeout=5)
        in_api.discard(("ml", "train-a"))  # the eviction went through; no reconcile yet
        after = client.List(api_pb2.ListPodResourcesRequest(), timeout=5)
        with pytest.raises(grpc.RpcError) as gone:
            client.Get(api_pb2.GetPodResourcesRequest(pod_name="train-a", pod_namespace="ml"))

    assert [p.name for p in before.pod_resources] == ["train-a", "train-b"]
    assert [p.name for p in after.pod_resources] == ["train-b"]
    assert gone.value.details() == "pod train-a in namespace ml not found"
