"""AllocResp bytes (a v1beta1 ContainerAllocateResponse) decode with the generated message the
product uses; the stand-in's hand-written encoder agrees with a real kubelet's bytes."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_gpu._proto.deviceplugin.v1beta1 import allocate_pb2
from tests.kit.node.kubelet import (
    AllocateResponse,
    DeviceSpec,
    Mount,
    encode_alloc_resp,
    nvidia_envvar_response,
    sample_text,
)

REAL = Path(__file__).resolve().parents[1] / "data" / "checkpoints" / "minikube-1gpu.json"
REAL_GPU = "GPU-11ba558d-3437-2335-2fd8-a78c8502f87f"


def _real_alloc_resp() -> str:
    entry = json.loads(REAL.read_text("utf-8"))["Data"]["PodDeviceEntries"][0]
    return str(entry["AllocResp"])


def _decode(raw: bytes) -> allocate_pb2.ContainerAllocateResponse:
    return allocate_pb2.ContainerAllocateResponse.FromString(raw)


def test_real_alloc_resp_names_the_visible_gpu() -> None:
    decoded = _decode(base64.b64decode(_real_alloc_resp()))

    assert dict(decoded.envs) == {"NVIDIA_VISIBLE_DEVICES": REAL_GPU}
    assert (list(decoded.mounts), list(decoded.devices), list(decoded.cdi_devices)) == ([], [], [])


def test_hand_encoder_reproduces_the_real_bytes() -> None:
    encoded = encode_alloc_resp(nvidia_envvar_response([REAL_GPU]))

    assert base64.b64encode(encoded).decode() == _real_alloc_resp()


def test_time_slice_replicas_share_one_physical_gpu_in_the_env() -> None:
    entries = json.loads(sample_text("time-sliced-4x.json"))["Data"]["PodDeviceEntries"]
    notebook = _decode(base64.b64decode(entries[2]["AllocResp"]))

    assert len(entries[2]["DeviceIDs"]["0"]) == 2
    assert notebook.envs["NVIDIA_VISIBLE_DEVICES"] == "GPU-4f2c7e1a-9b3d-4c8e-a1f0-6d5b2e8c9a17"


def test_every_field_survives_the_wire() -> None:
    response = AllocateResponse(
        envs={"NVIDIA_VISIBLE_DEVICES": "/var/run/nvidia-container-devices"},
        mounts=(Mount("/var/run/nvidia-container-devices/GPU-a", "/dev/null", read_only=True),),
        devices=(DeviceSpec("/dev/nvidia0", "/dev/nvidia0", "rw"),),
        annotations={
            "cdi.k8s.io/nvidia-device-plugin_0d1e": "k8s.device-plugin.nvidia.com/gpu=GPU-a"
        },
        cdi_devices=("k8s.device-plugin.nvidia.com/gpu=GPU-a",),
    )

    decoded = _decode(encode_alloc_resp(response))

    assert dict(decoded.envs) == response.envs
    assert [(m.container_path, m.host_path, m.read_only) for m in decoded.mounts] == [
        ("/var/run/nvidia-container-devices/GPU-a", "/dev/null", True)
    ]
    assert [(d.container_path, d.host_path, d.permissions) for d in decoded.devices] == [
        ("/dev/nvidia0", "/dev/nvidia0", "rw")
    ]
    assert dict(decoded.annotations) == response.annotations
    assert [c.name for c in decoded.cdi_devices] == ["k8s.device-plugin.nvidia.com/gpu=GPU-a"]


_text = st.text(max_size=300)  # long enough for multi-byte length varints


@settings(max_examples=60, deadline=None)
@given(
    envs=st.dictionaries(_text, _text, max_size=4),
    mounts=st.lists(st.builds(Mount, _text, _text, st.booleans()), max_size=3),
    cdi=st.lists(_text, max_size=3),
)
def test_arbitrary_responses_decode_to_what_was_encoded(
    envs: dict[str, str], mounts: list[Mount], cdi: list[str]
) -> None:
    decoded = _decode(
        encode_alloc_resp(AllocateResponse(envs, tuple(mounts), cdi_devices=tuple(cdi)))
    )

    assert dict(decoded.envs) == envs
    assert [(m.container_path, m.host_path, m.read_only) for m in decoded.mounts] == [
        (m.container_path, m.host_path, m.read_only) for m in mounts
    ]
    assert [c.name for c in decoded.cdi_devices] == cdi
