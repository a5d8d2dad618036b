"""What an AllocResp made visible, per NVIDIA's device-list strategies (docs/upstream-facts.md
N1.4), and pods read from `kubectl get pods -o json` output."""

from __future__ import annotations

import pytest

from kubectl_gpu.errors import InputError
from kubectl_gpu.gpumap.allocations import (
    AllocateResponse,
    Mount,
    PodRef,
    pods_from_document,
    sorted_pairs,
)

GPU0 = "GPU-11ba558d-3437-2335-2fd8-a78c8502f87f"
GPU1 = "GPU-4f2c7e1a-9b3d-4c8e-a1f0-6d5b2e8c9a17"
CDI_KEY = "cdi.k8s.io/nvidia-device-plugin_7c1f"  # NVIDIA's key ends in a random response UUID


def env(value: str) -> AllocateResponse:
    return AllocateResponse(envs=sorted_pairs({"NVIDIA_VISIBLE_DEVICES": value}))


@pytest.mark.parametrize(
    ("response", "visible"),
    [
        (env(f"{GPU0},{GPU1}"), (GPU0, GPU1)),
        (env("0,1"), ("0", "1")),  # deviceIDStrategy: index
        (env("0:1"), ("0:1",)),
        (env("void"), None),
        (env("all"), None),
        (AllocateResponse(), None),
        (
            AllocateResponse(
                envs=sorted_pairs({"NVIDIA_VISIBLE_DEVICES": "/var/run/nvidia-container-devices"}),
                mounts=(
                    Mount("/var/run/nvidia-container-devices/" + GPU0, "/dev/null"),
                    Mount("/usr/local/nvidia", "/opt/nvidia", read_only=True),
                ),
            ),
            (GPU0,),
        ),
        (
            AllocateResponse(
                annotations=sorted_pairs({CDI_KEY: f"k8s.device-plugin.nvidia.com/gpu={GPU1}"})
            ),
            (GPU1,),
        ),
        (AllocateResponse(cdi_devices=(f"k8s.device-plugin.nvidia.com/gpu={GPU0}",)), (GPU0,)),
    ],
    ids=[
        "envvar",
        "index",
        "mig-index",
        "void",
        "all",
        "empty",
        "volume-mounts",
        "cdi-annotation",
        "cdi-field",
    ],
)
def test_visible_devices_follow_each_strategy(
    response: AllocateResponse, visible: tuple[str, ...] | None
) -> None:
    assert response.visible_devices() == visible


def test_an_env_lookup_returns_the_injected_value() -> None:
    response = AllocateResponse(envs=sorted_pairs({"NVIDIA_GDS": "enabled", "B": "2"}))

    assert (response.env("NVIDIA_GDS"), response.env("MISSING")) == ("enabled", None)


def pod(uid: str, name: str, namespace: str = "ml", node: str | None = "n1") -> dict[str, object]:
    spec = {"nodeName": node} if node else {}
    return {
        "kind": "Pod",
        "metadata": {"uid": uid, "name": name, "namespace": namespace},
        "spec": spec,
    }


def test_a_pod_list_gives_each_pods_uid_name_and_node() -> None:
    document = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [pod("u1", "a"), pod("u2", "b", node=None)],
    }

    assert pods_from_document(document, "pods.json") == (
        PodRef("u1", "ml", "a", "n1"),
        PodRef("u2", "ml", "b", None),
    )


def test_a_single_pod_is_a_list_of_one() -> None:
    assert pods_from_document(pod("u1", "a"), "-") == (PodRef("u1", "ml", "a", "n1"),)


def test_items_without_a_uid_are_skipped() -> None:
    document = {"kind": "PodList", "items": [{"metadata": {"name": "x"}}, "junk", pod("u1", "a")]}

    assert [p.uid for p in pods_from_document(document, "pods.json")] == ["u1"]


@pytest.mark.parametrize("document", [[], "pods", {"kind": "Node"}, {"items": "none"}])
def test_something_else_is_an_input_error_naming_the_file(document: object) -> None:
    with pytest.raises(InputError) as failure:
        pods_from_document(document, "nodes.json")

    assert "nodes.json" in failure.value.message
    assert "kubectl get pods -A -o json" in failure.value.hint
